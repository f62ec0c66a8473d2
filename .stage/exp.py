"""Throwaway: quick.py with search's module settings from argv: exp.py SEED NAME=VALUE ... -- SPACES"""
import sys, time, ast
sys.path.insert(0, 'benchmarks/tune')
import leave_one_out
from kgit.model import search
seed = int(sys.argv[1]); args = sys.argv[2:]
cut = args.index('--') if '--' in args else len(args)
for a in args[:cut]:
    k, v = a.split('=', 1); setattr(search, k, ast.literal_eval(v))
names = args[cut + 1:] or list(leave_one_out.spaces())
total = 0
for n in names:
    t = time.time()
    got = leave_one_out.reached(n, 'model', None, 100, seed)['share']
    a, b = (round(100 * v) for v in got.values())
    total += a + b
    print(f"{n}: {a}/{b} ({time.time() - t:.0f} s)", flush=True)
print(args[:cut], 'sum', total, 'mean', total / (2 * len(names)))
