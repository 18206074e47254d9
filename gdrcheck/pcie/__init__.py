"""PCI knowledge over the facts: function kinds, capability lists, ACS, P2PDMA, Resizable BAR, the PCIe tree."""
