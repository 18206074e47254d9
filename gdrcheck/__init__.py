"""gdrcheck: will GPUDirect RDMA, GPU peer-to-peer and GPUDirect Storage work on this node?"""

__version__ = "0.1.0"
FORMAT_VERSION = "1.4"
