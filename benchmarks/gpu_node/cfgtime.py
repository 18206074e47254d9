"""How long reading each PCI function's config space takes (64, 256, 4096 bytes): slow in VMs for GPUs."""
import os
import time

for n in sorted(os.listdir("/sys/bus/pci/devices")):
    p = f"/sys/bus/pci/devices/{n}/config"
    for size in (64, 256, 4096):
        t0 = time.perf_counter()
        try:
            with open(p, "rb") as f:
                f.read(size)
        except OSError:
            pass
        dt = (time.perf_counter() - t0) * 1000
        print(f"{n} {size:5d} {dt:7.2f} ms")
