"""Machines built as files: sysfs trees written the way Linux lays them out (sysfs_tree) and the named
cases built from them (scenarios). The benchmarks build their inputs with these; the tests import them
from here too."""
