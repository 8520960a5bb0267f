"""A job that holds its GPU's memory (in the fake scenario) while it computes on the CPU for a moment."""

import time

total = sum(i * i for i in range(200_000))
time.sleep(0.5)
print("done", total)
