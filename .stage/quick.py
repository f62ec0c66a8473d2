"""Throwaway: the model at kgit's defaults (the setting every space chose), 100 starts of each space named
(all 15 by default), leave_one_out.reached's shares; seed as argv[1]."""
import sys, time
sys.path.insert(0, 'benchmarks/tune')
import leave_one_out
seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
names = sys.argv[2:] or list(leave_one_out.spaces())
total = 0
for n in names:
    t = time.time()
    got = leave_one_out.reached(n, 'model', None, 100, seed)['share']
    a, b = (round(100 * v) for v in got.values())
    total += a + b
    print(f"{n}: {a}/{b} ({time.time() - t:.0f} s)", flush=True)
print('sum', total, 'mean', total / (2 * len(names)))
