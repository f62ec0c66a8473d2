"""Issue 52's model of the shared-memory team's time, and the probe's predictions from it (no GPU needed).

    python .stage/predict_sm58.py

A team's programs run in step (each waits for its siblings' partials), so a launch lasts about as long as its
busiest SM takes to move its bytes. Fitted to main's H100 figures (experiments/held-out-shapes/wide-unaligned-paths/:
copy 3044 GB/s), the time is the longer of
    busiest SM's bytes / R        R = 23.5 GB/s, an SM's share of the copy (3044 / 132 = 23.1) give or take
    the launch's bytes / A        A = 2.71 TB/s, what the team sustains where every SM is equally busy (1024x65537)
plus S, 1.5 us at 512 rows (a launch's ramp: the copy of the same bytes pays 2 us there). The busiest SM holds
PROGRAMS programs of full parts, each ceil(M / teams) rows of PART elements (read and written: 4 bytes each).
Three slots (TEAM_SLOTS) take the copy's latency out of each program's chain: the model then gives them the
bytes' bound at A3 (central 2.9 TB/s, 95% of copy, what the team reads on long rows: 93% at 512x262144, and
layernorm's 94.8%), the SM bound at R3 (central 28 GB/s: 4 programs, each without its exposed copy wait).
"""
import math

COPY, SMS = 3044e9, 132
R, A, S = 23.5e9, 2.71e12, 1.5e-6
SCENARIOS = {"3 slots, central": (28e9, 2.90e12), "3 slots, if no faster than 4/5 of five programs": (18.8e9, 2.71e12)}
CAP = 8192


def shape(M, body, slots, even, deal, overhead=0.25):
    """(P, PART) as softmax._team_shape gives them."""
    least = max(1, math.ceil(body / CAP))
    if not even:
        return least, CAP

    def part(P):
        return math.ceil(math.ceil(body / P) / 8) * 8

    def busiest(P):
        teams = min(M, slots // P)
        return (math.ceil(M / teams) * (part(P) + overhead * CAP), P) if teams else (math.inf, P)
    P = min(range(least, 2 * least + 1), key=busiest) if deal else least
    return P, part(P)


def predict(M, N, programs, even, deal, r, a, cut):
    body = N // 8 * 8 if cut else N
    P, part = shape(M, body, SMS * programs, even, deal)
    teams = min(M, SMS * programs // P)
    rows = math.ceil(M / teams)
    busiest = programs * rows * part * 4
    total = 4 * M * N
    t = max(busiest / r, total / a) + (S if M <= 1024 else 0)
    return P, part, teams, rows, busiest, t


ROWS = [(512, 50257), (1024, 50257), (2048, 50257), (512, 100277), (1024, 65537), (512, 128256), (512, 151936),
        (256, 128256), (256, 151936), (512, 32000), (4096, 32000)]
# main on the H100 (us): experiments/held-out-shapes/wide-unaligned-paths/ and h100-aligned-body/
MEASURED = {(512, 50257): 43.28, (2048, 50257): 151.11, (1024, 65537): 101.20, (512, 100277): 78.74,
            (256, 128256): 48.18, (256, 151936): 57.53}
print(f"{'shape':>11s} {'variant':48s} {'P':>3s} {'PART':>5s} {'teams':>5s} {'rows':>4s} {'busiest SM':>10s} "
      f"{'us':>6s} {'% copy':>6s}  measured")
for M, N in ROWS:
    cut = N % 16 != 0
    for name, programs, even, deal, r, a in [("first built (whole chunks, 5 an SM)", 5, False, False, R, A),
                                             ("even (one length, dealt, 5 an SM)", 5, True, True, R, A),
                                             *[(n, 4, True, True, r3, a3) for n, (r3, a3) in SCENARIOS.items()]]:
        P, part, teams, rows, busiest, t = predict(M, N, programs, even, deal, r, a, cut)
        got = MEASURED.get((M, N)) if name.startswith("first") else None
        print(f"{M:>5d}x{N:<6d} {name:48s} {P:>3d} {part:>5d} {teams:>5d} {rows:>4d} {busiest / 1e3:>8.0f}KB "
              f"{t * 1e6:>6.1f} {100 * 4 * M * N / t / COPY:>6.1f}" + (f"  {got:.1f} us" if got else ""))
