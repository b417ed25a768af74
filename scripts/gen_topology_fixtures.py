#!/usr/bin/env python3
"""Generate the hwloc v2 XML topology fixtures under test/data/topology/.

The fixtures model GPU servers (and one CPU-only box) the way hwloc 2.9's
`lstopo --of xml` exports them, so that the daemon's topology loader can be
tested without the hardware.  Every fixture loads in hwloc itself
(`lstopo --input FILE --whole-io`), and re-exporting it with
`lstopo --input FILE --of xml -` keeps every object, attribute and info.

Conventions (relied upon by the C++ loader):
  * Machine -> Package (one per socket) -> NUMANode (memory child) + Core -> PU.
  * Host bridges (Bridge 0-1, depth 0) hang as I/O children of the Package
    whose CPUs are local to them (of the Machine on single-socket boxes).
  * Root ports are the PCI bridges (1-1) right under a host bridge; a PCIe
    switch is an upstream-port bridge whose children are downstream-port
    bridges, each holding one device.
  * Every PCI bridge and PCI device carries the custom infos PCIeLinkGen and
    PCIeLinkWidth, consistent with pci_link_speed (GB/s, as hwloc computes it).
  * Each NVIDIA GPU PCIDev has a CUDA co-processor OSDev (cudaN) and an NVML
    GPU OSDev (nvmlN), with the infos hwloc's cuda and nvml backends emit.

Usage: python3 scripts/gen_topology_fixtures.py [OUTPUT_DIR]
(default OUTPUT_DIR: test/data/topology next to this script's repository).
Output is deterministic: running it again reproduces the files byte for byte.
"""

import os
import struct
import sys
import uuid

GiB = 1 << 30

# --------------------------------------------------------------------------
# PCIe link speeds, computed the way hwloc does (hwloc/pci-common.c):
# per-lane GT/s x encoding efficiency / 8 bits, single direction, in GB/s.
# --------------------------------------------------------------------------
_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0}


def lane_gbps(gen):
    enc = 0.8 if gen <= 2 else 128.0 / 130.0
    return _GTS[gen] * enc / 8.0


def link_speed_str(gen, width):
    """pci_link_speed as hwloc writes it: a C float printed with %f."""
    value = lane_gbps(gen) * width
    f32 = struct.unpack("f", struct.pack("f", value))[0]
    return "%f" % f32


# --------------------------------------------------------------------------
# hwloc bitmap formatting (hwloc_bitmap_snprintf): 32-bit words, most
# significant first, separated by commas; zero words inside are left empty,
# and a zero last word is written "0x0".
# --------------------------------------------------------------------------
def bitmap(bits):
    bits = set(bits)
    if not bits:
        return "0x0"
    nwords = max(bits) // 32 + 1
    words = [0] * nwords
    for b in bits:
        words[b // 32] |= 1 << (b % 32)
    out = []
    for i in range(nwords - 1, -1, -1):
        w = words[i]
        if i == nwords - 1:
            out.append("0x%08x" % w)
        elif w:
            out.append("0x%08x" % w)
        elif i == 0:
            out.append("0x0")
        else:
            out.append("")
    return ",".join(out)


def xml_escape(s):
    return (s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


class Obj:
    """One <object>, with its attributes in hwloc's export order."""

    def __init__(self, otype, attrs=None, infos=None):
        self.type = otype
        self.attrs = list(attrs or [])  # [(name, value)] without type/gp_index
        self.infos = list(infos or [])  # [(name, value)]
        self.page_types = []            # [(size, count)]
        self.children = []
        self.gp_index = None

    def add(self, child):
        self.children.append(child)
        return child


class Topology:
    def __init__(self):
        self.next_gp = 1
        self.root = None
        self.distances = []  # (type, indexing, kind, name, [indexes], [values])

    def gp(self, obj):
        obj.gp_index = self.next_gp
        self.next_gp += 1
        return obj


# Attribute order used by hwloc 2.9's XML export (hwloc__xml_export_object_contents).
_CPU_SIDE_ORDER = ["os_index", "cpuset", "complete_cpuset", "allowed_cpuset",
                   "nodeset", "complete_nodeset", "allowed_nodeset"]


def render_object(obj, indent, lines):
    pad = "  " * indent
    parts = ['type="%s"' % obj.type]
    attrs = dict(obj.attrs)
    for key in _CPU_SIDE_ORDER:
        if key in attrs:
            parts.append('%s="%s"' % (key, attrs.pop(key)))
    parts.append('gp_index="%d"' % obj.gp_index)
    for key in ("name", "subtype"):
        if key in attrs:
            parts.append('%s="%s"' % (key, xml_escape(attrs.pop(key))))
    for key, value in obj.attrs:
        if key in attrs:
            parts.append('%s="%s"' % (key, xml_escape(str(value))))
    head = "%s<object %s" % (pad, " ".join(parts))
    if not (obj.infos or obj.page_types or obj.children):
        lines.append(head + "/>")
        return
    lines.append(head + ">")
    for size, count in obj.page_types:
        lines.append('%s  <page_type size="%d" count="%d"/>' % (pad, size, count))
    for name, value in obj.infos:
        lines.append('%s  <info name="%s" value="%s"/>' % (pad, xml_escape(name), xml_escape(value)))
    for child in obj.children:
        render_object(child, indent + 1, lines)
    lines.append("%s</object>" % pad)


_SUPPORT = [
    "discovery.pu", "discovery.numa", "discovery.numa_memory",
    "discovery.disallowed_pu", "discovery.disallowed_numa",
    "discovery.cpukind_efficiency",
    "cpubind.set_thisproc_cpubind", "cpubind.get_thisproc_cpubind",
    "cpubind.set_proc_cpubind", "cpubind.get_proc_cpubind",
    "cpubind.set_thisthread_cpubind", "cpubind.get_thisthread_cpubind",
    "cpubind.set_thread_cpubind", "cpubind.get_thread_cpubind",
    "cpubind.get_thisproc_last_cpu_location", "cpubind.get_proc_last_cpu_location",
    "cpubind.get_thisthread_last_cpu_location",
    "membind.set_thisthread_membind", "membind.get_thisthread_membind",
    "membind.set_area_membind", "membind.get_area_membind",
    "membind.alloc_membind", "membind.firsttouch_membind",
    "membind.bind_membind", "membind.interleave_membind",
    "membind.migrate_membind", "membind.get_area_memlocation",
    "custom.exported_support",
]


def render(topo):
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             '<!DOCTYPE topology SYSTEM "hwloc2.dtd">',
             '<topology version="2.0">']
    render_object(topo.root, 1, lines)
    for dtype, indexing, kind, name, indexes, values in topo.distances:
        lines.append('  <distances2 type="%s" nbobjs="%d" kind="%d" name="%s" indexing="%s">'
                     % (dtype, len(indexes), kind, name, indexing))
        # hwloc writes arrays in elements of at most 10 numbers; "length" is
        # the character count of the element's text.
        for tag, array in (("indexes", indexes), ("u64values", values)):
            for start in range(0, len(array), 10):
                text = "".join("%d " % v for v in array[start:start + 10])
                lines.append('    <%s length="%d">%s</%s>' % (tag, len(text), text, tag))
        lines.append("  </distances2>")
    for s in _SUPPORT:
        lines.append('  <support name="%s"/>' % s)
    lines.append("</topology>")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------
# CPU side
# --------------------------------------------------------------------------
class CpuSpec:
    def __init__(self, vendor, family, model, stepping, model_name):
        self.vendor = vendor
        self.family = family
        self.model = model
        self.stepping = stepping
        self.model_name = model_name

    def infos(self):
        return [("CPUVendor", self.vendor),
                ("CPUFamilyNumber", str(self.family)),
                ("CPUModelNumber", str(self.model)),
                ("CPUModel", self.model_name),
                ("CPUStepping", str(self.stepping))]


def build_cpu_side(topo, hostname, cpu, sockets, cores_per_socket, mem_per_node):
    """Machine -> Package xN -> (NUMANode, Core xC -> PU x2).

    Linux numbering on x86 with SMT: the first hardware threads of all cores
    come first (socket 0 then socket 1), then the sibling threads.
    Returns (machine, [packages]).
    """
    total_cores = sockets * cores_per_socket
    total_pus = total_cores * 2

    def pkg_pus(s):
        first = [s * cores_per_socket + c for c in range(cores_per_socket)]
        return first + [total_cores + p for p in first]

    all_pus = range(total_pus)
    all_nodes = range(sockets)
    machine = topo.gp(Obj("Machine", [
        ("os_index", 0),
        ("cpuset", bitmap(all_pus)), ("complete_cpuset", bitmap(all_pus)),
        ("allowed_cpuset", bitmap(all_pus)),
        ("nodeset", bitmap(all_nodes)), ("complete_nodeset", bitmap(all_nodes)),
        ("allowed_nodeset", bitmap(all_nodes)),
    ], [
        ("Backend", "Linux"),
        ("LinuxCgroup", "/"),
        ("OSName", "Linux"),
        ("OSRelease", "6.1.0-18-amd64"),
        ("OSVersion", "#1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)"),
        ("HostName", hostname),
        ("Architecture", "x86_64"),
        ("hwlocVersion", "2.9.0"),
        ("ProcessName", "lstopo"),
    ]))
    topo.root = machine
    packages = []
    for s in range(sockets):
        pus = pkg_pus(s)
        cs = bitmap(pus)
        ns = bitmap([s])
        cpuside = [("cpuset", cs), ("complete_cpuset", cs), ("nodeset", ns), ("complete_nodeset", ns)]
        pkg = machine.add(topo.gp(Obj("Package", [("os_index", s)] + cpuside, cpu.infos())))
        node = pkg.add(topo.gp(Obj("NUMANode", [("os_index", s)] + cpuside
                                   + [("local_memory", mem_per_node)])))
        node.page_types = [(4096, mem_per_node // 4096), (2097152, 0), (1073741824, 0)]
        for c in range(cores_per_socket):
            t0 = s * cores_per_socket + c
            t1 = total_cores + t0
            core_cs = bitmap([t0, t1])
            core = pkg.add(topo.gp(Obj("Core", [
                ("os_index", c), ("cpuset", core_cs), ("complete_cpuset", core_cs),
                ("nodeset", ns), ("complete_nodeset", ns)])))
            for t in (t0, t1):
                pu_cs = bitmap([t])
                core.add(topo.gp(Obj("PU", [
                    ("os_index", t), ("cpuset", pu_cs), ("complete_cpuset", pu_cs),
                    ("nodeset", ns), ("complete_nodeset", ns)])))
        packages.append(pkg)
    return machine, packages


# --------------------------------------------------------------------------
# I/O side
# --------------------------------------------------------------------------
def busid(bus, dev=0, fn=0, domain=0):
    return "%04x:%02x:%02x.%01x" % (domain, bus, dev, fn)


def link_infos(gen, width):
    return [("PCIeLinkGen", str(gen)), ("PCIeLinkWidth", str(width))]


def host_bridge(topo, parent, secondary, subordinate, domain=0):
    return parent.add(topo.gp(Obj("Bridge", [
        ("bridge_type", "0-1"), ("depth", 0),
        ("bridge_pci", "%04x:[%02x-%02x]" % (domain, secondary, subordinate))])))


def pci_bridge(topo, parent, depth, bus, dev, fn, secondary, subordinate, ids, gen, width,
               vendor_name, device_name):
    """A PCI-to-PCI bridge (root port, switch upstream or downstream port).

    ids = (vendor, device, subvendor, subdevice, revision)."""
    v, d, sv, sd, rev = ids
    return parent.add(topo.gp(Obj("Bridge", [
        ("bridge_type", "1-1"), ("depth", depth),
        ("bridge_pci", "%04x:[%02x-%02x]" % (0, secondary, subordinate)),
        ("pci_busid", busid(bus, dev, fn)),
        ("pci_type", "0604 [%04x:%04x] [%04x:%04x] %02x" % (v, d, sv, sd, rev)),
        ("pci_link_speed", link_speed_str(gen, width)),
    ], [("PCIVendor", vendor_name), ("PCIDevice", device_name)] + link_infos(gen, width))))


def pci_dev(topo, parent, bus, dev, fn, klass, ids, gen, width, vendor_name, device_name):
    v, d, sv, sd, rev = ids
    return parent.add(topo.gp(Obj("PCIDev", [
        ("pci_busid", busid(bus, dev, fn)),
        ("pci_type", "%04x [%04x:%04x] [%04x:%04x] %02x" % (klass, v, d, sv, sd, rev)),
        ("pci_link_speed", link_speed_str(gen, width)),
    ], [("PCIVendor", vendor_name), ("PCIDevice", device_name)] + link_infos(gen, width))))


class GpuSpec:
    def __init__(self, klass, device_id, subsys, rev, pci_name, model, mem_kib, sms,
                 l2_kib, cc_major, serial_prefix=None):
        self.klass = klass
        self.device_id = device_id
        self.subsys = subsys
        self.rev = rev
        self.pci_name = pci_name
        self.model = model
        self.mem_kib = mem_kib
        self.sms = sms
        self.l2_kib = l2_kib
        self.cc_major = cc_major
        self.serial_prefix = serial_prefix


# CUDAGlobalMemorySize = cudaDeviceProp.totalGlobalMem >> 10 (KiB): what CUDA
# reports is a little below the nominal capacity (the driver reserves some).
RTX3090 = GpuSpec(0x0300, 0x2204, (0x10de, 0x147d), 0xa1, "GA102 [GeForce RTX 3090]",
                  "NVIDIA GeForce RTX 3090", 24850752, 82, 6144, 8)
RTX4090 = GpuSpec(0x0300, 0x2684, (0x10de, 0x167c), 0xa1, "AD102 [GeForce RTX 4090]",
                  "NVIDIA GeForce RTX 4090", 24791360, 128, 73728, 8)
RTXA6000 = GpuSpec(0x0300, 0x2230, (0x10de, 0x1459), 0xa1, "GA102GL [RTX A6000]",
                   "NVIDIA RTX A6000", 49853760, 84, 6144, 8, serial_prefix="132302")
H100SXM = GpuSpec(0x0302, 0x2330, (0x10de, 0x16c1), 0xa1, "GH100 [H100 SXM5 80GB]",
                  "NVIDIA H100 80GB HBM3", 83025152, 132, 51200, 9, serial_prefix="165232")


def gpu_uuid(fixture, index):
    return "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_URL, "mobius-fixture/%s/gpu%d" % (fixture, index)))


def add_gpu(topo, parent, fixture, index, spec, bus, gen, width):
    """A GPU PCIDev at <bus>:00.0 with its cudaN and nvmlN OS devices.
    Returns (pcidev, nvml_osdev)."""
    sv, sd = spec.subsys
    dev = pci_dev(topo, parent, bus, 0, 0, spec.klass, (0x10de, spec.device_id, sv, sd, spec.rev),
                  gen, width, "NVIDIA Corporation", spec.pci_name)
    cuda_infos = [
        ("Backend", "CUDA"),
        ("GPUVendor", "NVIDIA Corporation"),
        ("GPUModel", spec.model),
        ("CUDAGlobalMemorySize", str(spec.mem_kib)),
        ("CUDAL2CacheSize", str(spec.l2_kib)),
        ("CUDAMultiProcessors", str(spec.sms)),
    ]
    # hwloc's cuda backend only knows FP32 cores/MP up to compute capability 8.x
    # (and says 64 for all of 7.x/8.x); for 9.x it leaves the info out.
    if spec.cc_major in (7, 8):
        cuda_infos.append(("CUDACoresPerMP", "64"))
    cuda_infos.append(("CUDASharedMemorySizePerMP", "48"))
    dev.add(topo.gp(Obj("OSDev", [("subtype", "CUDA"), ("name", "cuda%d" % index),
                                  ("osdev_type", 5)], cuda_infos)))
    nvml_infos = [("Backend", "NVML"), ("GPUVendor", "NVIDIA Corporation"), ("GPUModel", spec.model)]
    if spec.serial_prefix:
        nvml_infos.append(("NVIDIASerial", "%s%07d" % (spec.serial_prefix, 1000 + index)))
    nvml_infos.append(("NVIDIAUUID", gpu_uuid(fixture, index)))
    nvml = dev.add(topo.gp(Obj("OSDev", [("subtype", "NVML"), ("name", "nvml%d" % index),
                                         ("osdev_type", 1)], nvml_infos)))
    return dev, nvml


def mac(fixture, n):
    h = uuid.uuid5(uuid.NAMESPACE_URL, "mobius-fixture/%s/mac%d" % (fixture, n)).bytes
    return ":".join("%02x" % b for b in (0x0c, 0x42, 0xa1, h[0], h[1], h[2]))


def add_nic(topo, parent, fixture, n, bus, ids, vendor_name, device_name, gen, width, ifname,
            ib_dev=None):
    """An Ethernet (class 0200) or InfiniBand (class 0207) controller at <bus>:00.0."""
    klass = 0x0207 if ib_dev else 0x0200
    dev = pci_dev(topo, parent, bus, 0, 0, klass, ids, gen, width, vendor_name, device_name)
    if ib_dev:
        h = uuid.uuid5(uuid.NAMESPACE_URL, "mobius-fixture/%s/guid%d" % (fixture, n)).hex
        guid = "%s:%s:%s:%s" % (h[0:4], h[4:8], h[8:12], h[12:16])
        addr = "00:00:10:29:fe:80:00:00:00:00:00:00:" + ":".join(h[i:i + 2] for i in range(0, 16, 2))
        dev.add(topo.gp(Obj("OSDev", [("name", ifname), ("osdev_type", 2)],
                            [("Address", addr), ("Port", "1")])))
        dev.add(topo.gp(Obj("OSDev", [("name", ib_dev), ("osdev_type", 3)], [
            ("NodeGUID", guid), ("SysImageGUID", guid),
            ("Port1State", "4"), ("Port1LID", "0x%x" % (n + 1)), ("Port1LMC", "0"),
            ("Port1GID0", "fe80:0000:0000:0000:" + guid)])))
    else:
        dev.add(topo.gp(Obj("OSDev", [("name", ifname), ("osdev_type", 2)],
                            [("Address", mac(fixture, n))])))
    return dev


def add_nvme(topo, parent, bus, ids, device_name, gen, width, blk, size_kib, model, serial,
             linux_id):
    dev = pci_dev(topo, parent, bus, 0, 0, 0x0108, ids, gen, width,
                  "Samsung Electronics Co Ltd", device_name)
    dev.add(topo.gp(Obj("OSDev", [("subtype", "Disk"), ("name", blk), ("osdev_type", 0)], [
        ("Size", str(size_kib)), ("SectorSize", "512"), ("LinuxDeviceID", linux_id),
        ("Model", model), ("SerialNumber", serial)])))
    return dev


# --------------------------------------------------------------------------
# PCI component catalogue: (vendor, device, subvendor, subdevice, revision)
# --------------------------------------------------------------------------
INTEL = "Intel Corporation"
AMD = "Advanced Micro Devices, Inc. [AMD]"
PLX = "PLX Technology, Inc."
BROADCOM = "Broadcom / LSI"
MELLANOX = "Mellanox Technologies"

SKX_ROOT_PORT_A = ((0x8086, 0x2030, 0x15d9, 0x095d, 0x04), "Sky Lake-E PCI Express Root Port A")
SKX_ROOT_PORT_C = ((0x8086, 0x2032, 0x15d9, 0x095d, 0x04), "Sky Lake-E PCI Express Root Port C")
PEX8796 = ((0x10b5, 0x8796, 0x10b5, 0x8796, 0xab), "PEX 8796 PCI Express Gen 3 (8.0 GT/s) Switch")
ZEN3_GPP = ((0x1022, 0x1483, 0x0000, 0x0000, 0x00), "Starship/Matisse GPP Bridge")
PEX88096 = ((0x1000, 0xc010, 0x1000, 0x100b, 0xb0), "PEX880xx PCIe Gen 4 Switch")
SPR_ROOT_PORT = ((0x8086, 0x352a, 0x8086, 0x0000, 0x04), "Sapphire Rapids PCI Express Root Port")
PEX89104 = ((0x1000, 0xc030, 0x1000, 0x100b, 0xb0), "PEX890xx PCIe Gen 5 Switch")
ICX_ROOT_PORT = ((0x8086, 0x347a, 0x8086, 0x0000, 0x06), "Ice Lake Xeon PCI Express Root Port")


def switch(topo, parent, depth, up_bus, ids_name, gen, width, ports):
    """A PCIe switch: upstream port at <up_bus>:00.0, internal bus up_bus+1,
    downstream ports <up_bus+1>:<dev>.0 each leading to one bus.
    ports = [(dev, bus, gen, width)]; returns {bus: downstream bridge}."""
    ids, name = ids_name
    vendor = PLX if ids[0] == 0x10b5 else BROADCOM
    sub = max(p[1] for p in ports)
    up = pci_bridge(topo, parent, depth, up_bus, 0, 0, up_bus + 1, sub, ids, gen, width, vendor, name)
    downs = {}
    for dev, bus, pgen, pwidth in ports:
        downs[bus] = pci_bridge(topo, up, depth + 1, up_bus + 1, dev, 0, bus, bus, ids, pgen, pwidth,
                                vendor, name)
    return up, downs


def numa_latency(topo, nodes):
    n = len(nodes)
    values = [10 if i == j else 21 for i in range(n) for j in range(n)]
    # kind = HWLOC_DISTANCES_KIND_FROM_OS | HWLOC_DISTANCES_KIND_MEANS_LATENCY
    topo.distances.append(("NUMANode", "os", 5, "NUMALatency", list(range(n)), values))


# --------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------
def paper_testbed():
    """Mobius paper testbed: 2x Xeon Gold 6130, 1.5 TB DRAM, PCIe 3.0, 8x RTX 3090,
    4 GPUs behind one PCIe switch under each CPU root complex."""
    name = "paper_testbed_2s_2sw_8x3090"
    topo = Topology()
    cpu = CpuSpec("GenuineIntel", 6, 85, 4, "Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz")
    machine, pkgs = build_cpu_side(topo, "mobius-testbed", cpu, 2, 16, 768 * GiB)
    numa_latency(topo, [0, 1])
    gpu = 0
    for s, pkg in enumerate(pkgs):
        root_bus = 0x17 if s == 0 else 0x85
        hb = host_bridge(topo, pkg, root_bus, root_bus + 7)
        rp_ids, rp_name = SKX_ROOT_PORT_A
        rp = pci_bridge(topo, hb, 1, root_bus, 0, 0, root_bus + 1, root_bus + 6, rp_ids, 3, 16,
                        INTEL, rp_name)
        up_bus = root_bus + 1
        gpu_buses = [up_bus + 2 + i for i in range(4)]
        _, downs = switch(topo, rp, 2, up_bus, PEX8796, 3, 16,
                          [(8 + i, b, 3, 16) for i, b in enumerate(gpu_buses)])
        for b in gpu_buses:
            add_gpu(topo, downs[b], name, gpu, RTX3090, b, 3, 16)
            gpu += 1
        rp2_ids, rp2_name = SKX_ROOT_PORT_C
        if s == 0:
            rp2 = pci_bridge(topo, hb, 1, root_bus, 2, 0, root_bus + 7, root_bus + 7, rp2_ids, 3, 8,
                             INTEL, rp2_name)
            add_nic(topo, rp2, name, 0, root_bus + 7, (0x8086, 0x1572, 0x8086, 0x0007, 0x01),
                    INTEL, "Ethernet Controller X710 for 10GbE SFP+", 3, 8, "ens1f0")
        else:
            rp2 = pci_bridge(topo, hb, 1, root_bus, 2, 0, root_bus + 7, root_bus + 7, rp2_ids, 3, 4,
                             INTEL, rp2_name)
            add_nvme(topo, rp2, root_bus + 7, (0x144d, 0xa808, 0x144d, 0xa801, 0x00),
                     "NVMe SSD Controller SM981/PM981/PM983", 3, 4, "nvme0n1", 1875374424,
                     "SAMSUNG MZ1LB1T9HALS-00007", "S436NA0M500001", "259:0")
    return name, topo


def rtx4090_box():
    """8x RTX 4090 on 2x AMD EPYC 7313; per socket one host bridge, two Gen4 x16
    root ports, each with a PEX88096-class switch holding two GPUs."""
    name = "rtx4090_2s_4sw_8gpu"
    topo = Topology()
    cpu = CpuSpec("AuthenticAMD", 25, 1, 1, "AMD EPYC 7313 16-Core Processor")
    machine, pkgs = build_cpu_side(topo, "rtx4090-node", cpu, 2, 16, 512 * GiB)
    numa_latency(topo, [0, 1])
    gpu = 0
    for s, pkg in enumerate(pkgs):
        root_bus = 0x40 if s == 0 else 0xc0
        last_bus = root_bus + 8 + (1 if s == 0 else 0)
        hb = host_bridge(topo, pkg, root_bus, last_bus)
        rp_ids, rp_name = ZEN3_GPP
        for k, rp_dev in enumerate((1, 3)):
            first = root_bus + 1 + 4 * k           # switch upstream port bus
            gpu_buses = [first + 2, first + 3]
            rp = pci_bridge(topo, hb, 1, root_bus, rp_dev, 1, first, first + 3, rp_ids, 4, 16,
                            AMD, rp_name)
            _, downs = switch(topo, rp, 2, first, PEX88096, 4, 16,
                              [(i, b, 4, 16) for i, b in enumerate(gpu_buses)])
            for b in gpu_buses:
                add_gpu(topo, downs[b], name, gpu, RTX4090, b, 4, 16)
                gpu += 1
        if s == 0:
            nic_bus = root_bus + 9
            rp = pci_bridge(topo, hb, 1, root_bus, 5, 1, nic_bus, nic_bus, rp_ids, 4, 16, AMD, rp_name)
            add_nic(topo, rp, name, 0, nic_bus, (0x15b3, 0x101d, 0x15b3, 0x0016, 0x00),
                    MELLANOX, "MT2892 Family [ConnectX-6 Dx]", 4, 16, "ens1f0np0")
    return name, topo


def root_ports_box():
    """Single-socket workstation: 4x RTX A6000, each on its own Gen4 x16 root port."""
    name = "root_ports_1s_4gpu"
    topo = Topology()
    cpu = CpuSpec("AuthenticAMD", 25, 8, 2, "AMD Ryzen Threadripper PRO 5955WX 16-Cores")
    machine, pkgs = build_cpu_side(topo, "a6000-workstation", cpu, 1, 16, 256 * GiB)
    hb = host_bridge(topo, machine, 0x00, 0x04)
    rp_ids, rp_name = ZEN3_GPP
    for i, (dev, fn) in enumerate(((1, 1), (1, 2), (3, 1), (3, 2))):
        bus = i + 1
        rp = pci_bridge(topo, hb, 1, 0x00, dev, fn, bus, bus, rp_ids, 4, 16, AMD, rp_name)
        add_gpu(topo, rp, name, i, RTXA6000, bus, 4, 16)
    return name, topo


def dgx_h100():
    """DGX-H100-like: 2x Xeon Platinum 8480C, 8x H100 SXM5 80GB behind four
    Gen5 switches (two per socket, each on its own host bridge / root port,
    two GPUs and one ConnectX-7 per switch), all GPUs connected by NVLink4
    through NVSwitch (18 links x 25 GB/s per GPU)."""
    name = "nvlink_dgx_8xh100"
    topo = Topology()
    cpu = CpuSpec("GenuineIntel", 6, 143, 8, "Intel(R) Xeon(R) Platinum 8480C")
    machine, pkgs = build_cpu_side(topo, "dgx-h100", cpu, 2, 56, 1024 * GiB)
    numa_latency(topo, [0, 1])
    gpu = 0
    nic = 0
    nvmls = []
    rp_ids, rp_name = SPR_ROOT_PORT
    for s, pkg in enumerate(pkgs):
        for root_bus in ((0x18, 0x40) if s == 0 else (0x98, 0xc0)):
            up_bus = root_bus + 1
            gpu_buses = [root_bus + 3, root_bus + 4]
            nic_bus = root_bus + 5
            hb = host_bridge(topo, pkg, root_bus, nic_bus)
            rp = pci_bridge(topo, hb, 1, root_bus, 1, 0, up_bus, nic_bus, rp_ids, 5, 16, INTEL, rp_name)
            _, downs = switch(topo, rp, 2, up_bus, PEX89104, 5, 16,
                              [(0, gpu_buses[0], 5, 16), (1, gpu_buses[1], 5, 16),
                               (2, nic_bus, 5, 16)])
            for b in gpu_buses:
                _, nvml = add_gpu(topo, downs[b], name, gpu, H100SXM, b, 5, 16)
                nvmls.append(nvml)
                gpu += 1
            add_nic(topo, downs[nic_bus], name, nic, nic_bus, (0x15b3, 0x1021, 0x15b3, 0x0041, 0x00),
                    MELLANOX, "MT2910 Family [ConnectX-7]", 5, 16, "ibp%ds0" % nic_bus,
                    ib_dev="mlx5_%d" % nic)
            nic += 1
    n = len(nvmls)
    # NVML backend: 25000 MB/s per active NVLink (v2-v4), 1000000 on the diagonal.
    values = [1000000 if i == j else 18 * 25000 for i in range(n) for j in range(n)]
    # kind = HWLOC_DISTANCES_KIND_FROM_OS | HWLOC_DISTANCES_KIND_MEANS_BANDWIDTH
    topo.distances.append(("OSDev", "gp", 9, "NVLinkBandwidth", [o.gp_index for o in nvmls], values))
    return name, topo


def cpu_only():
    """Single-socket CPU-only server: Xeon Silver 4314, one Intel X710 NIC and the
    board's ASPEED BMC VGA (class 0300 but not an NVIDIA GPU)."""
    name = "cpu_only_1s"
    topo = Topology()
    cpu = CpuSpec("GenuineIntel", 6, 106, 6, "Intel(R) Xeon(R) Silver 4314 CPU @ 2.40GHz")
    machine, pkgs = build_cpu_side(topo, "cpu-node", cpu, 1, 16, 128 * GiB)
    rp_ids, rp_name = ICX_ROOT_PORT
    hb = host_bridge(topo, machine, 0x00, 0x03)
    rp = pci_bridge(topo, hb, 1, 0x00, 0x01, 0, 0x01, 0x01, rp_ids, 3, 8, INTEL, rp_name)
    add_nic(topo, rp, name, 0, 0x01, (0x8086, 0x1572, 0x8086, 0x0007, 0x02),
            INTEL, "Ethernet Controller X710 for 10GbE SFP+", 3, 8, "ens1f0")
    rp2 = pci_bridge(topo, hb, 1, 0x00, 0x1c, 0, 0x02, 0x03, rp_ids, 1, 1, INTEL, rp_name)
    aspeed_br = pci_bridge(topo, rp2, 2, 0x02, 0, 0, 0x03, 0x03, (0x1a03, 0x1150, 0x15d9, 0x1b95, 0x04),
                           1, 1, "ASPEED Technology, Inc.", "AST1150 PCI-to-PCI Bridge")
    pci_dev(topo, aspeed_br, 0x03, 0, 0, 0x0300, (0x1a03, 0x2000, 0x15d9, 0x1b95, 0x41), 1, 1,
            "ASPEED Technology, Inc.", "ASPEED Graphics Family")
    return name, topo


FIXTURES = [paper_testbed, rtx4090_box, root_ports_box, dgx_h100, cpu_only]


# --------------------------------------------------------------------------
# Self-check: hwloc itself does not verify PCI bus ranges or our custom infos,
# so check the conventions the loader relies on before writing anything.
# --------------------------------------------------------------------------
def _bus_of(obj):
    return int(dict(obj.attrs)["pci_busid"].split(":")[1], 16)


def _bus_range(obj):
    rng = dict(obj.attrs)["bridge_pci"].split("[")[1].rstrip("]")
    lo, hi = rng.split("-")
    return int(lo, 16), int(hi, 16)


def _link(obj):
    infos = dict(obj.infos)
    return int(infos["PCIeLinkGen"]), int(infos["PCIeLinkWidth"])


def check(name, topo):
    def fail(msg):
        raise SystemExit("%s: %s" % (name, msg))

    gps = []

    def walk(obj, parent, depth):
        gps.append(obj.gp_index)
        attrs = dict(obj.attrs)
        if obj.type in ("Bridge", "PCIDev"):
            if obj.type == "Bridge" and attrs["bridge_type"] == "0-1":
                if parent.type not in ("Machine", "Package"):
                    fail("host bridge under %s" % parent.type)
            else:
                gen, width = _link(obj)
                if attrs["pci_link_speed"] != link_speed_str(gen, width):
                    fail("%s link speed %s != gen%d x%d" % (attrs["pci_busid"], attrs["pci_link_speed"],
                                                           gen, width))
                lo, hi = _bus_range(parent)
                if not lo <= _bus_of(obj) <= hi:
                    fail("%s outside its parent's buses [%02x-%02x]" % (attrs["pci_busid"], lo, hi))
                if obj.type == "Bridge":
                    if int(attrs["depth"]) != depth:
                        fail("%s depth %s != %d" % (attrs["pci_busid"], attrs["depth"], depth))
                    clo, chi = _bus_range(obj)
                    if not (lo <= clo <= chi <= hi):
                        fail("%s buses not nested in its parent's" % attrs["pci_busid"])
                    kids = obj.children
                    if kids and all(k.type == "Bridge" for k in kids):
                        # switch upstream port: same link as the port above it
                        if (dict(parent.attrs).get("bridge_type") == "1-1"
                                and _link(parent) != (gen, width)):
                            fail("%s upstream link differs from the port above" % attrs["pci_busid"])
                    elif len(kids) == 1 and kids[0].type == "PCIDev":
                        if _link(kids[0]) != (gen, width):
                            fail("%s link differs from its device's" % attrs["pci_busid"])
        for child in obj.children:
            walk(child, obj, depth + 1 if obj.type == "Bridge" else 0)

    walk(topo.root, None, 0)
    if len(set(gps)) != len(gps):
        fail("duplicate gp_index")


def bad_inputs(good_paper_xml):
    cut = good_paper_xml.index('<object type="PCIDev"')
    cut += len('<object type="PCIDev" gp_index="')  # stop inside the element's attributes
    return {
        "not_xml.xml": "This is not an XML topology.\nlstopo --of xml writes those.\n",
        "truncated.xml": good_paper_xml[:cut],
        "not_hwloc.xml": ('<?xml version="1.0" encoding="UTF-8"?>\n'
                          '<inventory>\n'
                          '  <gpu index="0" model="NVIDIA GeForce RTX 3090" busid="0000:1a:00.0"/>\n'
                          '</inventory>\n'),
        "empty.xml": "",
        # hwloc 2.9 imports v1 and v2 XML only: an export from hwloc 3.x is refused
        # ("cannot import XML version 3.0 > 2").
        "bad_version.xml": ('<?xml version="1.0" encoding="UTF-8"?>\n'
                            '<!DOCTYPE topology SYSTEM "hwloc3.dtd">\n'
                            '<topology version="3.0">\n'
                            '  <object type="Machine" os_index="0" cpuset="0x00000001" '
                            'complete_cpuset="0x00000001" allowed_cpuset="0x00000001" '
                            'nodeset="0x00000001" complete_nodeset="0x00000001" '
                            'allowed_nodeset="0x00000001" gp_index="1">\n'
                            '    <object type="NUMANode" os_index="0" cpuset="0x00000001" '
                            'complete_cpuset="0x00000001" nodeset="0x00000001" '
                            'complete_nodeset="0x00000001" gp_index="2" local_memory="1073741824"/>\n'
                            '    <object type="PU" os_index="0" cpuset="0x00000001" '
                            'complete_cpuset="0x00000001" nodeset="0x00000001" '
                            'complete_nodeset="0x00000001" gp_index="3"/>\n'
                            '  </object>\n'
                            '</topology>\n'),
    }


def write(path, text):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


def main(argv):
    if len(argv) > 1:
        out = argv[1]
    else:
        repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        out = os.path.join(repo, "test", "data", "topology")
    os.makedirs(os.path.join(out, "bad"), exist_ok=True)
    paper = None
    for fn in FIXTURES:
        name, topo = fn()
        check(name, topo)
        text = render(topo)
        if fn is paper_testbed:
            paper = text
        write(os.path.join(out, name + ".xml"), text)
        print("wrote %s.xml" % name)
    for fname, text in sorted(bad_inputs(paper).items()):
        write(os.path.join(out, "bad", fname), text)
        print("wrote bad/%s" % fname)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
