# vmlab: only what a vmlab x86-64 guest uses (q35 with ACPI/HMAT, ISA serial
# console, virtio-blk disks on PCI).
CONFIG_Q35=y
CONFIG_VIRTIO_PCI=y
CONFIG_VIRTIO_BLK=y
CONFIG_SERIAL_ISA=y
CONFIG_VMLAB_CTL=y
