"""Throwaway: a short synthetic failing run at whose step (the rule as kept) the model takes a pair one of whose
single moves failed from the best, which the rule would hold back were failures counted as ran."""
import random, sys
sys.path.insert(0, 'benchmarks/tune')
import leave_one_out, replay
from kgit.model import search
name = sys.argv[1]
measured, table, space, allowed = leave_one_out.load(name)
rows = [r for r in measured['rows'] if r['correct']]
rows = random.Random(0).sample(rows, 100)
calls = []
orig = search.propose_model
def spy(best, space, points, *a, **k):
    calls.append((best, list(points), a, k))
    return orig(best, space, points, *a, **k)
search.propose_model = spy
search.EXP_PAIR_MEASURED = 4
for i, row in enumerate(rows):
    calls.clear()
    replay.replay(table, space, row['config'], 8, 1.0, replay.strategy('model', i, allowed=allowed), [])
    for best, points, a, k in calls:
        if len(points) > 7: continue
        on = orig(best, space, points, **k)
        moved = [n for n in space if on.config[n] != best[n]]
        failed = {search.key(p.config) for p in points if p.score is None}
        if len(moved) != 2 or not any(search.key({**best, n: on.config[n]}) in failed for n in moved): continue
        search.EXP_PAIR_MEASURED = 1
        off = orig(best, space, points, **k)
        search.EXP_PAIR_MEASURED = 4
        if off.config == on.config: continue
        print(i, k, 'best', best, '\n on', on, '\n off', off)
        for p in points: print('   ', p)
        sys.exit()
