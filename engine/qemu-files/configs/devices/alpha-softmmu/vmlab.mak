# vmlab: the clipper (DP264) machine and virtio-blk disks on its PCI bus.
CONFIG_DP264=y
CONFIG_VIRTIO_PCI=y
CONFIG_VIRTIO_BLK=y
CONFIG_VMLAB_CTL=y
