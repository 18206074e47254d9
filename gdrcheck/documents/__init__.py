"""The JSON documents (the contract), each built once from an evaluated node; schemas in gdrcheck/schemas/."""
