"""ALISTA in PyTorch, written apart from unroll, as a peer for its learned
unrollings (docs/experiments/unrolled-optimization): m = 250, n = 500,
A ~ N(0, 1/m) with unit columns, Bernoulli(0.1) x N(0, 1) codes, noiseless;
W the minimizer of ||W^T A||_F with diag(W^T A) = 1; support selection with
the largest min(1.2 (t + 1), 13)% magnitudes past theta_t skipping the
shrinkage. Trained stage-wise with torch.optim.Adam (batch 64, lr 5e-4, then
0.2 and 0.02 times it; layer j's step times 0.3^(t - j) in layer t's stages,
or on the gradient, or not at all), each stage keeping its best point on
1,000 held-out samples. Prints NMSE per layer on 10,000 test samples.

usage: alista-torch.py [THREADS] [STEPS_PER_STAGE] [step|grad|none] [f32|f64]
"""
import sys, time, torch, numpy as np
torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
stage_steps = int(sys.argv[2]) if len(sys.argv) > 2 else 300
decay_on = sys.argv[3] if len(sys.argv) > 3 else "step"   # step | grad | none
dtype = torch.float64 if (len(sys.argv) > 4 and sys.argv[4] == "f64") else torch.float32
m, n, K, pnz = 250, 500, 16, 0.1
g = torch.Generator().manual_seed(0)
A = torch.randn(m, n, generator=g, dtype=torch.float64) / m ** 0.5
A = A / A.norm(dim=0, keepdim=True)
G = A @ A.T
Ginv_A = torch.linalg.solve(G, A)
W = Ginv_A / (A * Ginv_A).sum(0, keepdim=True)
WA = W.T @ A
print("coherence", (WA - torch.diag(torch.diag(WA))).abs().max().item(), "diag err", (torch.diag(WA) - 1).abs().max().item())
L = 1.001 * torch.linalg.matrix_norm(A, 2).item() ** 2
A, W = A.to(dtype), W.to(dtype)
gam = [torch.tensor(1.0, dtype=dtype, requires_grad=True) for _ in range(K)]
the = [torch.tensor(0.4 / L, dtype=dtype, requires_grad=True) for _ in range(K)]
ps = [min((t + 1) * 1.2, 13.0) for t in range(K)]

def sample(B, gen):
    supp = (torch.rand(B, n, generator=gen) <= pnz).to(dtype)
    x = supp * torch.randn(B, n, generator=gen).to(dtype)
    return x @ A.T, x

def shrink_ss(z, th, q):
    a = z.abs()
    k = int(round((1 - q / 100) * (n - 1)))  # 'nearest' percentile index
    thr = a.sort(dim=1).values[:, k:k + 1]
    idx = ((a > th) & (a > thr)).to(dtype).detach()
    zc = (1 - idx) * z
    return idx * z + torch.sign(zc) * torch.clamp(zc.abs() - th, min=0)

def forward(b, depth):
    x = torch.zeros(b.shape[0], n, dtype=dtype)
    outs = []
    for t in range(depth):
        x = shrink_ss(x + gam[t] * ((b - x @ A.T) @ W), the[t], ps[t])
        outs.append(x)
    return outs

gv = torch.Generator().manual_seed(2)
bval, xval = sample(1000, gv)
gt = torch.Generator().manual_seed(3)
btest, xtest = sample(10000, gt)
def nmse(b, x, depth):
    with torch.no_grad():
        xh = forward(b, depth)[-1]
        return 10 * np.log10(((xh - x) ** 2).sum().item() / (x ** 2).sum().item())

gtr = torch.Generator().manual_seed(1)
mult = {}
t0 = time.time(); step = 0
for t in range(K):
    mult[t] = 1.0
    for stage, (own, lr) in enumerate([(True, 5e-4), (False, 1e-4), (False, 1e-5)]):
        params = [gam[t], the[t]] if own else [p for j in range(t + 1) for p in (gam[j], the[j])]
        opt = torch.optim.Adam(params, lr=lr)
        best, since, bestv = 1e9, 0, None
        for s in range(stage_steps):
            b, x = sample(64, gtr)
            loss = 0.5 * ((forward(b, t + 1)[-1] - x) ** 2).sum()
            opt.zero_grad(); loss.backward()
            if not own and decay_on == "grad":
                for j in range(t + 1):
                    gam[j].grad *= mult[j]; the[j].grad *= mult[j]
            old = [p.detach().clone() for p in params]
            opt.step(); step += 1
            if not own and decay_on == "step":
                with torch.no_grad():
                    for j in range(t + 1):
                        for p, o in ((gam[j], old[2 * j]), (the[j], old[2 * j + 1])):
                            p.copy_(o + mult[j] * (p - o))
            if (s + 1) % 100 == 0:
                v = nmse(bval, xval, t + 1)
                if v < best - 0.01: best, since, bestv = v, 0, [p.detach().clone() for p in params]
                else: since += 1
                if since >= 5: break
        with torch.no_grad():
            for p, v in zip(params, bestv): p.copy_(v)
    for j in range(t + 1): mult[j] *= 0.3
    print(f"layer {t+1:2d}: val {nmse(bval, xval, t+1):8.2f} dB  test {nmse(btest, xtest, t+1):8.2f} dB  {time.time()-t0:6.1f} s step {step}", flush=True)
print("gamma", [round(g.item(), 4) for g in gam]); print("theta", [f"{x.item():.2e}" for x in the])
