"""Machines built as files, for the tests (and the benchmarks, which import them from here): sysfs trees
written the way Linux lays them out (sysfs_tree), realistic servers (servers) and the named cases built from
them (scenarios)."""
