/*
 * vmlab-ctl: the guest asks for its own snapshot.
 *
 * A run restored from a snapshot must start from a guest-chosen instruction,
 * as gem5's m5 checkpoint and MARSSx86's ptlcalls do: a host that watches
 * the console and stops the machine stops it wherever the host happened to
 * be. The guest writes the byte 'S' to this ISA port when it is
 * quiescent; the write stops the machine after that instruction
 * (RUN_STATE_PAUSED, a QMP STOP event), and the host then saves it with
 * migrate to a file. A restored machine goes on with the next instruction.
 *
 * The modelled disks (patch 0005) keep requests outside virtio's migrated
 * state, so a snapshot is refused while any is outstanding: the guest reads
 * the port back (0: no request yet, 1: stopped for a snapshot, 2: refused)
 * and says so on its console.
 */

#include "qemu/osdep.h"
#include "hw/isa/isa.h"
#include "hw/qdev-properties.h"
#include "hw/core/cpu.h"
#include "hw/virtio/virtio-blk.h"
#include "migration/vmstate.h"
#include "qemu/module.h"
#include "qom/object.h"
#include "system/runstate.h"

#define TYPE_VMLAB_CTL "vmlab-ctl"
OBJECT_DECLARE_SIMPLE_TYPE(VmlabCtlState, VMLAB_CTL)

#define VMLAB_CTL_SNAPSHOT 'S'

struct VmlabCtlState {
    ISADevice parent_obj;

    uint32_t iobase;
    uint32_t status;
    MemoryRegion io;
};

static uint64_t vmlab_ctl_read(void *opaque, hwaddr addr, unsigned size)
{
    VmlabCtlState *s = opaque;

    return s->status;
}

static void vmlab_ctl_write(void *opaque, hwaddr addr, uint64_t val,
                            unsigned width)
{
    VmlabCtlState *s = opaque;

    /* one byte, so /dev/port can send it where user space has no outb */
    if (addr != 0 || (val & 0xff) != VMLAB_CTL_SNAPSHOT) {
        return;
    }
    if (vmlab_disk_outstanding) {
        s->status = 2;
        fprintf(stderr, "vmlab-ctl: snapshot refused: %u modelled disk "
                "requests outstanding\n", vmlab_disk_outstanding);
        return;
    }
    s->status = 1;
    fprintf(stderr, "vmlab-ctl: snapshot requested by cpu %d\n",
            current_cpu ? current_cpu->cpu_index : -1);
    qemu_system_vmstop_request_prepare();
    qemu_system_vmstop_request(RUN_STATE_PAUSED);
    /*
     * The request is the main loop's to carry out, and until it does the
     * vCPUs would run on: on a loaded host the guest went past its
     * checkpoint (reading a job disk that was not there yet) before the
     * machine stopped, and the snapshot held that later state. Every vCPU
     * stops here instead, as pause_all_vcpus() would stop it, so none runs
     * another instruction before the save, however late the main loop is.
     */
    CPUState *cpu;
    CPU_FOREACH(cpu) {
        cpu->stop = true;
    }
    if (current_cpu) {
        cpu_exit(current_cpu);   /* stop after this instruction */
    }
}

static const MemoryRegionOps vmlab_ctl_ops = {
    .read = vmlab_ctl_read,
    .write = vmlab_ctl_write,
    .valid.min_access_size = 1,
    .valid.max_access_size = 4,
    .endianness = DEVICE_LITTLE_ENDIAN,
};

static const VMStateDescription vmstate_vmlab_ctl = {
    .name = TYPE_VMLAB_CTL,
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32(status, VmlabCtlState),
        VMSTATE_END_OF_LIST()
    },
};

static void vmlab_ctl_realize(DeviceState *d, Error **errp)
{
    ISADevice *dev = ISA_DEVICE(d);
    VmlabCtlState *s = VMLAB_CTL(d);

    memory_region_init_io(&s->io, OBJECT(dev), &vmlab_ctl_ops, s,
                          TYPE_VMLAB_CTL, 4);
    memory_region_add_subregion(isa_address_space_io(dev), s->iobase, &s->io);
}

static const Property vmlab_ctl_properties[] = {
    DEFINE_PROP_UINT32("iobase", VmlabCtlState, iobase, 0x5a0),
};

static void vmlab_ctl_class_init(ObjectClass *klass, void *data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);

    dc->realize = vmlab_ctl_realize;
    dc->vmsd = &vmstate_vmlab_ctl;
    device_class_set_props(dc, vmlab_ctl_properties);
    set_bit(DEVICE_CATEGORY_MISC, dc->categories);
}

static const TypeInfo vmlab_ctl_info = {
    .name          = TYPE_VMLAB_CTL,
    .parent        = TYPE_ISA_DEVICE,
    .instance_size = sizeof(VmlabCtlState),
    .class_init    = vmlab_ctl_class_init,
};

static void vmlab_ctl_register_types(void)
{
    type_register_static(&vmlab_ctl_info);
}

type_init(vmlab_ctl_register_types)
