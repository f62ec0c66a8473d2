"""Throwaway: a short softmax (old) run at whose step the model takes a pair one of whose keys already
moved alone from the best and ran: the test's fixture."""
import random, sys
sys.path.insert(0, 'benchmarks/tune')
import leave_one_out, replay
from kgit.model import search
measured, table, space, allowed = leave_one_out.load('softmax (old)')
rows = [r for r in measured['rows'] if r['correct']]
rows = random.Random(0).sample(rows, 100)
calls = []
orig = search.propose_model
def spy(best, space, points, *a, **k):
    calls.append((best, list(points), a, k))
    return orig(best, space, points, *a, **k)
search.propose_model = spy
found = 0
for i, row in enumerate(rows):
    calls.clear()
    replay.replay(table, space, row['config'], 8, 1.0, replay.strategy('model', i), [])
    for best, points, a, k in calls:
        if len(points) > 6 or any(p.score is None for p in points):
            continue
        search.EXP_PAIR_MEASURED = False
        off = orig(best, space, points, **k)
        moved = [n for n in space if off.config[n] != best[n]]
        ran = {search.key(p.config) for p in points}
        if len(moved) != 2 or not any(search.key({**best, n: off.config[n]}) in ran for n in moved):
            continue
        search.EXP_PAIR_MEASURED = 4
        on = orig(best, space, points, **k)
        search.EXP_PAIR_MEASURED = False
        print(i, k.get('seed'), 'best', best, '\n off', off, '\n on', on)
        for p in points: print('   ', tuple(p.config.values()), tuple(p.origin.values()), p.kept, p.score)
        found += 1
        break
    if found >= 3: break
