"""Exclusive instructions per request, B minus A, per function, from two
callgrind outputs of bench/instructions' larger run (CALLGRIND_KEEP):
    python3 diff.py A/callgrind.* B/callgrind.* [REQUESTS=18000]
"""
import sys,re,subprocess
def load(f):
    out=subprocess.run(['callgrind_annotate','--auto=no','--inclusive=no','--threshold=100',f],capture_output=True,text=True).stdout
    d={}
    for line in out.splitlines():
        m=re.match(r'\s*([\d,]+)\s+\([^)]*\)\s+(.*)$',line)
        if not m: continue
        name=m.group(2)
        if 'PROGRAM TOTALS' in name: continue
        name=re.sub(r' \[.*\]$','',name)
        # strip file path prefix
        if ':' in name: name=name.split(':',1)[1] if name.startswith('/') or name.startswith('.') else name
        d[name]=d.get(name,0)+int(m.group(1).replace(',',''))
    return d
a=load(sys.argv[1]); b=load(sys.argv[2]); n=float(sys.argv[3]) if len(sys.argv)>3 else 18000
rows=[(b.get(k,0)-a.get(k,0),k) for k in set(a)|set(b)]
rows.sort()
tot=sum(r[0] for r in rows)
for dlt,k in rows:
    if abs(dlt)/n>=4: print(f"{dlt/n:+8.1f}  {k[:150]}")
print(f"{tot/n:+8.1f}  total of the functions shown above and below the threshold")
