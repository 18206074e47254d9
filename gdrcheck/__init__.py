"""gdrcheck: will GPUDirect RDMA, GPU peer-to-peer and GPUDirect Storage work on this node?"""

__version__ = "0.1.0"
FORMAT_VERSION = "1.4"  # the pairs and check documents (and the rules list)
# the topology, bar1 and fingerprint documents: 1.5 gave each its status word ("status")
VIEW_FORMAT_VERSION = "1.5"
