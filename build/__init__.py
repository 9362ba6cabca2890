"""The build stage: SCons (build/SConstruct) builds the kernels, initramfs,
our QEMU and the timing plugin into the cache; build/wrapper.py runs it."""
