# Counts, per TMA dK/dV kernel PTX file in DIR, the ld.global lines between a wgmma.mma_async and the
# next ex2.approx inside a loop (a label and a later branch back to it) that holds both.
# Usage: python3 scan_ptx.py DIR
import re,sys,glob
for f in sorted(glob.glob(sys.argv[1]+'/*dkdv*tma*')):
    lines=open(f).read().split('\n')
    labels={}
    for i,l in enumerate(lines):
        m=re.match(r'^\s*(\$L__\w+):',l)
        if m: labels[m.group(1)]=i
    found=set()
    for i,l in enumerate(lines):
        m=re.search(r'\bbra(\.uni)?\s+(\$L__\w+);',l)
        if not m or m.group(2) not in labels or labels[m.group(2)]>=i: continue
        body=lines[labels[m.group(2)]:i+1]
        if not any('wgmma.mma_async' in x for x in body) or not any('ex2.approx' in x for x in body): continue
        after=False
        for x in body:
            if 'wgmma.mma_async' in x: after=True
            if 'ex2.approx' in x: after=False
            if after and 'ld.global' in x: found.add(x.strip())
    print(f.split('/')[-1], len(found), list(found)[:2])
