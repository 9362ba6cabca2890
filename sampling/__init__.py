"""SimPoint sampling's maths, above the results stage: basic-block vectors
read and clustered into simulation points (simpoint.py, SimPoint 3.2's
algorithm, stored in simpoint_picks), and the whole run's figures
estimated from its regions (estimate.py). pipeline/sampled.py runs the
regions through the engine's Snapshots and calls both."""
