export PYTHONPATH=$PWD HELD_OUT_DEADLINE=$(( $(date +%s) + 270 )); cp .stage/new/layernorm.py skills/kernels/layernorm/layernorm.py; timeout 90 python skills/kernels/layernorm/test_layernorm.py --check-only --json > $OUT/layernorm-check.json 2>&1; tail -c 300 $OUT/layernorm-check.json; python -c "
import torch,importlib.util as u
for f in ('.stage/old/layernorm.py','.stage/new/layernorm.py'):
 s=u.spec_from_file_location(f.split('/')[1],f);m=u.module_from_spec(s);s.loader.exec_module(m)
 for N in (65536,262144):
  x=torch.randn(96,N,device='cuda')*2+5;w=torch.rand(N,device='cuda')+.5;b=torch.randn(N,device='cuda');r=m.layernorm_ref(x,w,b)
  print(f,N,[(m.layernorm(x,w,b).double()-r).abs().max().item() for _ in range(3)],m.last_config)
" > $OUT/layernorm-fp32-error.txt 2>&1; cat $OUT/layernorm-fp32-error.txt; python benchmarks/held_out_bench.py layernorm .stage/old/layernorm.py --json $OUT/layernorm-halves.jsonl > $OUT/layernorm-halves.txt 2>&1; python benchmarks/held_out_bench.py layernorm .stage/old/layernorm.py --sweep --json $OUT/layernorm-sweep.jsonl > $OUT/layernorm-sweep.txt 2>&1; cat $OUT/layernorm-halves.txt $OUT/layernorm-sweep.txt
