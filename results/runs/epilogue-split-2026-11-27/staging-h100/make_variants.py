import json, os, shutil
src_dir='out-inloop'; d='out-stage'
bench=json.load(open(f'{src_dir}/compute.json'))
STORE='                c_desc.store([offs_am + cid * SPLIT_M, offs_bn], acc.to(tl.bfloat16))\n'
SPLIT='''                # Two half-tile TMA stores through one staging buffer per consumer (the ring gets its smem).
                halves = tl.permute(tl.reshape(acc, (SPLIT_M, 2, BLOCK_N // 2)), (0, 2, 1))
                acc0, acc1 = tl.split(halves)
                c_buf = tlx.local_view(c_stage, cid)
                tlx.async_descriptor_store_wait(0)
                tlx.local_store(c_buf, acc0.to(tl.bfloat16))
                tlx.async_descriptor_store(c_desc, c_buf, [offs_am + cid * SPLIT_M, offs_bn])
                tlx.async_descriptor_store_wait(0)
                tlx.local_store(c_buf, acc1.to(tl.bfloat16))
                tlx.async_descriptor_store(c_desc, c_buf, [offs_am + cid * SPLIT_M, offs_bn + BLOCK_N // 2])
'''
def edit(text, pn):
    assert text.count(STORE)==1, 'store'
    text=text.replace(STORE, SPLIT)
    old='c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[SPLIT_M, BLOCK_N])'
    assert old in text, 'desc'
    text=text.replace(old, 'c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[SPLIT_M, BLOCK_N // 2])')
    old='    b_ring = tlx.local_alloc((BLOCK_K, BLOCK_N), tl.bfloat16, NUM_STAGES)\n'
    assert old in text, 'ring'
    text=text.replace(old, old+'    c_stage = tlx.local_alloc((SPLIT_M, BLOCK_N // 2), tl.bfloat16, NUM_CONSUMERS)\n')
    if pn:
        old='                tl.inline_asm_elementwise("cp.async.bulk.wait_group 1; mov.b32 $0, 0;"'
        assert text.count(old)==1, 'wait'
        text=text.replace(old,'                tl.inline_asm_elementwise("cp.async.bulk.wait_group 2; mov.b32 $0, 0;"')
    return text
out=[]
for s in bench['shapes']:
    cases=[c for c in s['cases'] if c['label'] in ('tlx coop128x256s3','tlx emitted coop128x256s3pn')]
    new=[]
    for c in cases:
        pn = 'pn' in c['label']
        od=os.path.dirname(c['file'])
        if not os.path.exists(f'{d}/{od}'): shutil.copytree(f'{src_dir}/{od}', f'{d}/{od}')
        for stages in (3,4):
            new_dir=f'{od}_e2s{stages}'
            if not os.path.exists(f'{d}/{new_dir}'):
                shutil.copytree(f'{src_dir}/{od}', f'{d}/{new_dir}', ignore=shutil.ignore_patterns('*.cubin','*.sm_90a.json'))
                fp=f'{d}/{new_dir}/{os.path.basename(c["file"])}'
                text=edit(open(fp).read(), pn)
                open(fp,'w').write(text)
                mp=f'{d}/{new_dir}/manifest.json'; m=json.load(open(mp))
                for k in m['kernels']:
                    if 'NUM_STAGES' in k.get('constexprs',{}): k['constexprs']['NUM_STAGES']=stages
                json.dump(m,open(mp,'w'),indent=2)
            v=dict(c, label=f"{c['label']} e2s{stages}")
            for k in ('file','cubin','metadata'): v[k]=c[k].replace(od,new_dir)
            new.append(v)
    s['cases']=cases+new
    out.append(s)
bench['shapes']=out
json.dump(bench,open(f'{d}/compute.json','w'),indent=1)
print(sum(len(s['cases']) for s in out), [c['label'] for c in out[0]['cases']])
