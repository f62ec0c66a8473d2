"""Throwaway: for the starts that miss 97% at 8 (or 99% at 16), at each step read propose_model's locals
at its return and compare the step taken with the best step to a configuration at the bar."""
import math, random, sys
from collections import Counter
sys.path.insert(0, 'benchmarks/tune')
import leave_one_out, replay
from kgit.model import search

name = sys.argv[1]
frac, budget = (0.97, 8) if len(sys.argv) < 3 else (float(sys.argv[2]), int(sys.argv[3]))
measured, table, space, allowed = leave_one_out.load(name)
top = measured['best']['value']
rows = [r for r in measured['rows'] if r['correct'] and (allowed is None or allowed(r['config']))]
rows = random.Random(0).sample(rows, min(100, len(rows)))
caught = []
def prof(frame, event, arg):
    if event == 'return' and frame.f_code is search.propose_model.__code__:
        caught.append(dict(frame.f_locals))
def value(c):
    return table[replay.key(c)]
classes, stuck, single, singles_sd, ending = Counter(), Counter(), Counter(), [], Counter()
for i, row in enumerate(rows):
    tried, caught[:] = [], []
    sys.setprofile(prof)
    trail = replay.replay(table, space, row['config'], 16, 1.0, replay.strategy('model', i, allowed=allowed), tried)
    sys.setprofile(None)
    end = trail[min(budget, len(trail) - 1)]
    if end['value'] >= frac * top:
        continue
    stuck[(tuple(sorted(end['config'].items())), round(end['value'] / top, 3))] += 1
    endc = end['config']
    nbar = [c for c in search.single_moves(endc, space) if table[replay.key(c)]['correct'] and table[replay.key(c)]['value'] >= frac*top]
    seen = {replay.key(r['config']) for r in tried[:budget+1]}
    ending['bar one key away, measured' if any(replay.key(c) in seen for c in nbar) else 'bar one key away, never measured' if nbar else 'no bar one key away'] += 1
    print(f"start {i} keeps {end['value']/top:.3f} {end['config']}")
    for step, loc in enumerate(caught[:budget], 1):
        if 'gain' not in loc or 'chosen' not in loc:
            print(f"  {step} no model locals ({loc.get('reason')})"); continue
        pool, gain, mean, sd = loc['pool'], loc['gain'], loc['mean'], loc['sd']
        best, inc, fit = loc['best'], loc['incumbent'], loc['fit']
        ch = loc['chosen']
        bar = [j for j, c in enumerate(pool) if value(c)['correct'] and value(c)['value'] >= frac * top]
        if not bar:
            classes['no bar config left'] += 1; continue
        b = max(bar, key=lambda j: gain[j])
        nb = len([n for n in space if pool[b][n] != best[n]])
        pos = search._positions_moved(best, pool[b], space)
        rank = int((gain > gain[b]).sum())
        if mean[b] < mean[ch] and gain[b] < gain[ch]: cls = 'expected lower'
        elif gain[b] > gain[ch]: cls = 'held back by rule'
        else: cls = 'lost on sd'
        classes[cls] += 1
        one = [j for j in bar if len([n for n in space if pool[j][n] != best[n]]) == 1]
        if one:
            o = max(one, key=lambda j: gain[j])
            ocls = ('taken' if o == ch else 'expected lower' if mean[o] < mean[ch] and gain[o] < gain[ch]
                    else 'held back by rule' if gain[o] > gain[ch] else 'lost on sd')
            single[ocls] += 1
            singles_sd.append((sd[o], sd[ch], mean[o]-mean[ch]))
        else:
            single['no single-key bar move'] += 1
        dome = 'none' if fit[2] == 0 else ('centre' if tuple(fit[3]) == tuple(search.centre(space)) else 'best')
        print(f"  {step} best {value(best)['value']/top:.3f} took {value(pool[ch])['value']/top if value(pool[ch])['correct'] else 'fail'} "
              f"m{mean[ch]-inc:+.3f} sd{sd[ch]:.3f} ei{gain[ch]:.4f} {[n+'='+str(pool[ch][n]) for n in space if pool[ch][n]!=best[n]]} | "
              f"bar {value(pool[b])['value']/top:.3f} keys{nb} pos{pos} m{mean[b]-inc:+.3f} sd{sd[b]:.3f} ei{gain[b]:.4f} rank{rank} "
              f"{[n+'='+str(pool[b][n]) for n in space if pool[b][n]!=best[n]]} {cls} dome={dome} coupled={fit[4]}")
print('best step to bar (any keys):', classes)
print('best single-key step to bar:', single)
import statistics
if singles_sd: print('single bar move sd median', statistics.median(x[0] for x in singles_sd), 'chosen sd median', statistics.median(x[1] for x in singles_sd), 'mean diff median', statistics.median(x[2] for x in singles_sd))
print('ending:', ending)
for k, v in stuck.most_common(): print(v, k)
