"""The screens the monitor opens over its main one, a module each: a GPU's detail (enter), the
full stack dump and the verdict's reasoning (d, v), the keys (?), loading the agent (a)."""
