"""The protocol every stage speaks, and the lowest level: the facts shared
between the guest's C, the host and the timing model (facts.py, read from
experiments/lib/vmlab_facts.h) and the tagged console records built on
them (records.py). Every stage may import it; it imports nothing of vmlab."""
