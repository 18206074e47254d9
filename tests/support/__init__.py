"""Shared pieces of the tests: tree builders, named scenarios, scripted libraries, process runners."""
