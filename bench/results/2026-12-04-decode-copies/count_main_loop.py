import re, sys
# Dynamic PTX instructions per trip of the decode main loop (the loop holding
# cp.async.wait_group N and mma.sync): straight-line count, inner loops weighted by their trip count
# (given), blocks only reached through masks counted too (an upper bound for unmasked runs).
lines = open(sys.argv[1]).read().split('\n')
inner_trips = int(sys.argv[2]) if len(sys.argv) > 2 else 8
labels = {}
for i, l in enumerate(lines):
    m = re.match(r'^(\$L__BB\d+_\d+):', l)
    if m: labels[m.group(1)] = i
def is_instr(l):
    s = l.strip()
    return s and not s.startswith('//') and not s.startswith('.') and not s.endswith(':') and s not in ('{','}') and not s.startswith('$')
# loops: backward branches
loops = []
for i, l in enumerate(lines):
    m = re.search(r'bra(?:\.uni)?\s+(\$L__BB\d+_\d+);', l)
    if m and labels.get(m.group(1), 1e9) < i: loops.append((labels[m.group(1)], i))
main = [lp for lp in loops if any('cp.async.wait_group' in lines[j] for j in range(*lp)) and any('mma.sync' in lines[j] for j in range(*lp))]
main = max(main, key=lambda lp: lp[1]-lp[0])
inner = [lp for lp in loops if main[0] < lp[0] and lp[1] < main[1]]
total = 0; inner_total = 0
for j in range(main[0], main[1]+1):
    if not is_instr(lines[j]): continue
    w = inner_trips if any(a <= j <= b for a, b in inner) else 1
    total += w
    if w > 1: inner_total += w
def count(pat): return sum(1 for j in range(main[0], main[1]+1) if re.search(pat, lines[j]))
print(f"main loop lines {main}, inner loops {inner}")
print(f"dynamic PTX instructions a trip ~{total} (inner loops x{inner_trips}: {inner_total})")
print("static in loop: div/rem", count(r'\b(div|rem)\.[su]'), "cp.async.cg", count('cp.async.cg'), "ld.shared", count('ld.shared'), "mma", count('mma.sync'), "mul.lo.s64", count(r'mul\.lo\.s64'))
