"""Throwaway: every step of the first 8 of every start (100 starts), by kind; how often it beat the best
of its time by 1% (a keep the decision can make) and how often it reached 97% of the space's best."""
import random, sys
from collections import defaultdict
sys.path.insert(0, 'benchmarks/tune')
import leave_one_out, replay
from kgit.model import search
caught = []
def prof(frame, event, arg):
    if event == 'return' and frame.f_code is search.propose_model.__code__:
        caught.append(dict(frame.f_locals))
for name in sys.argv[1:]:
    measured, table, space, allowed = leave_one_out.load(name)
    top = measured['best']['value']
    rows = [r for r in measured['rows'] if r['correct'] and (allowed is None or allowed(r['config']))]
    rows = random.Random(0).sample(rows, min(100, len(rows)))
    stats = defaultdict(lambda: [0, 0, 0, 0])
    for i, row in enumerate(rows):
        tried, caught[:] = [], []
        sys.setprofile(prof)
        trail = replay.replay(table, space, row['config'], 8, 1.0, replay.strategy('model', i, allowed=allowed), tried)
        sys.setprofile(None)
        seen = {replay.key(row['config'])}
        for step, loc in enumerate(caught[:8], 1):
            if 'chosen' not in loc: continue
            best = loc['best']; c = loc['pool'][loc['chosen']]
            moved = [n for n in space if c[n] != best[n]]
            pos = search._positions_moved(best, c, space)
            if len(moved) == 1: kind = 'one key, next value' if pos == 1 else 'one key, farther'
            elif len(moved) == 2:
                singles = sum(replay.key({**best, n: c[n]}) in seen for n in moved)
                kind = f'pair, {singles} single moves measured'
            else: kind = f'{len(moved)} keys'
            r, b = table[replay.key(c)], table[replay.key(best)]
            s = stats[kind]
            s[0] += 1; s[1] += (not r['correct']); s[2] += r['correct'] and r['value'] > 1.01 * b['value']
            s[3] += r['correct'] and r['value'] >= 0.97 * top
            seen.add(replay.key(c))
    print(name)
    for kind, (n, f, up, bar) in sorted(stats.items()):
        print(f"  {kind:32s} {n:4d} steps, failed {f:3d}, beat the best by 1% {up:4d} ({up/n:.0%}), at the bar {bar:4d} ({bar/n:.0%})")
