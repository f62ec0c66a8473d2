"""sm62: the static and the dynamic deal of softmax's shared-memory team, modelled from sm60's diagnostic.

    python .stage/sm62_model.py        (CPU, a second)

A team i starts its rows a_i after the launch starts (the ramp: its first rows' copies land, it reduces and publishes
row 0) and takes r_i a row after that (an iteration: wait for the next row's copies, reduce it, gather, write), so
it leaves at a_i + n_i r_i after n_i rows. Two groups of teams, as the diagnostic saw them: the low teams (A,
programs launched first) and the high ones (B), B starting later and slower a row, each team spread about its
group. Fitted to sm60-diagnostic-h100.txt's exits by rows a program ran at 512x50257 and 2048x50257 bf16 (a_A =
6 us, the ramp's median first publish; the rest solved from the medians and p90s, see sm62_notes.md).
Static deal: team t takes rows t, t + T, ... Dynamic (DEAL): rows t and t + T, then each next row from a counter,
claimed at the start of the iteration two before the one that issues its copies (the row index rides with the
first program's partial), so the team has ~3.9 rows to go when it claims (LOOKAHEAD); a team claims until its
first miss. Prints the model's static exits against the diagnostic's and the makespans (first start -> last exit).
"""
import heapq
import random
import statistics


def teams_of(M, T, shape, seed):
    rnd = random.Random(seed)
    a_A, r_A, k, a_B, s_a, s_r = shape
    n_static = [M // T + (t < M % T) for t in range(T)]
    b = M % T or T  # the low teams take one row more in the static deal: the diagnostic's groups
    out = []
    for t in range(T):
        a, r = (a_A, r_A) if t < b else (a_B, r_A * k)
        out.append((a + rnd.gauss(0, s_a), r * (1 + rnd.gauss(0, s_r)), n_static[t]))
    return out


def static(teams):
    return [a + n * r for a, r, n in teams]


def dynamic(teams, M, lookahead):
    T = len(teams)
    left = M - 2 * T
    n = [2] * T
    # claims in time order: team i's claim of its row k (k >= 2) at a_i + (k + 1 - lookahead) r_i (row k is
    # written at a_i + (k + 1) r_i); the first claims (k = 2) in the prologue, at launch order
    events = sorted((max(0.0, a + (2 + 1 - lookahead) * r) + 1e-3 * i, i) for i, (a, r, _) in enumerate(teams))
    heapq.heapify(events)
    while events:
        _, i = heapq.heappop(events)
        if left == 0:
            continue  # a miss: the team stops claiming
        left -= 1
        n[i] += 1
        a, r, _ = teams[i]
        heapq.heappush(events, (a + (n[i] + 1 - lookahead) * r, i))
    return [a + k * r for (a, r, _), k in zip(teams, n)]


def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


# (a_A, r_A, B's rate over A's, a_B, sd of a team's start, relative sd of a team's row time) fitted at 512 rows of
# 50257 (r_A 4.615 from A's median exit 33.69 = 6 + 6 r_A) and 2048 (r_A 6.01: 138.23 = 6 + 22 r_A), k and a_B
# from the two B medians (34.82 at 5 rows, 144.55 at 21): k = 1.064, a_B = 10.3; the spreads from A's p90 - median
# at both (2.36, 5.98): sd 1.6 us of start, 3.3% of row time. 512x128256: r_A = (83.89 - 6) / 13 = 5.99 (the
# 13-row teams), the same k, a_B from the 12-row median 84.46, the same spreads.
SHAPES = {
    "512x50257 bf16 (T=94, P=7)": (512, 94, (6.0, 4.615, 1.064, 10.3, 1.6, 0.033), 39.56, 41.92),
    "2048x50257 bf16 (T=94)": (2048, 94, (6.0, 6.01, 1.064, 10.3, 1.6, 0.033), 151.10, 151.85),
    "512x128256 bf16 (T=41, P=16)": (512, 41, (6.0, 5.99, 1.064, 84.46 - 12 * 5.99 * 1.064, 1.6, 0.033), 90.97, 92.00),
}
LOOKAHEAD = 3.9
if __name__ == "__main__":
    for name, (M, T, shape, span, kernel_us) in SHAPES.items():
        st, dy, dy2 = [], [], []
        for seed in range(200):
            teams = teams_of(M, T, shape, seed)
            st.append(max(static(teams)))
            dy.append(max(dynamic(teams, M, LOOKAHEAD)))
            dy2.append(max(dynamic(teams, M, 2.25)))
        one = static(teams_of(M, T, shape, 0))
        b = M % T or T
        st, dy, dy2 = statistics.mean(st), statistics.mean(dy), statistics.mean(dy2)
        print(f"{name}: the static model's exits A med {statistics.median(one[:b]):.1f} p90 {q(one[:b], .9):.1f}, "
              f"B med {statistics.median(one[b:]):.1f} p90 {q(one[b:], .9):.1f}\n"
              f"    makespan static {st:.1f} us (measured span {span}), dealt {dy:.1f} (claimed at the copies, "
              f"lookahead 2.25: {dy2:.1f}); saved {st - dy:.1f} us by the model, {span - dy:.1f} from the measured "
              f"span: of main's {kernel_us} us, x{1 - (st - dy) / kernel_us:.3f} / x{1 - (span - dy) / kernel_us:.3f}")
