"""CATCHNet: the detector's graph on the device, forward and backward (no training loop).

Shapes, with B windows of T steps and N channels, P/S the patch size/stride, L patches:
  x (B, N, T) -> RevIN -> FFT over time -> patches (B, L, N, 2P) [Re | Im]
  -> projection: Dense(2P -> cf) ("linear", the official code) or a ComplexConv1d of
     window P, stride S and cf/2 complex filters ("complex", the seed's design)
  -> tokens (B L, N, cf): e_layers x { h += attn(LN h, mask); h += FF(LN h) }, one mask
     (B L, N, N) from the mask generator for every head and layer
  -> Dense(cf -> D) -> get_r, get_i Dense(D -> D) -> two flatten heads (B N, L D)
     (3 x residual ReLU Dense(L D -> L D), Dense(L D -> T)) = Re, Im of a spectrum Z
  -> iFFT -> [Re | Im] -> Dense(2T -> T) -> RevIN denorm = xhat (B, N, T).
Loss = mean (xhat - x)^2 + auxi_lambda mean |Z - FFT(RevIN x)| + dc_lambda L_DC.

Taught in notebooks/07_catch.
"""

from __future__ import annotations

from .. import fft
from ..layers import ComplexConv1d, Dense
from ..layers.base import Layer
from ..loss import DeviceLoss
from ..parameter import FlatLayout
from .attention import ChannelDCLoss, MaskedAttention
from .ops import (GELU, LayerNorm, MaskGenerator, add, freq_mae, freq_patches, join_complex,
                  join_rows, patch_amplitude, revin_denorm, revin_norm, swap_axes12)

PROJECTIONS = ("linear", "complex")
MASK_INPUTS = ("spectrum", "amplitude")
DC_SOURCES = ("attention", "patches")


class _Composite(Layer):
    """A layer made of named layers, listed once by ``parts(**config)`` as ``{name: (class,
    keyword arguments)}``: built from that list (each an attribute), and its parameters'
    shapes computed from it without building anything (checkpoints check files with them).
    Its parameters and release are its parts'."""

    @staticmethod
    def parts(**config) -> dict:
        raise NotImplementedError

    @classmethod
    def parameter_shapes(cls, config: dict) -> dict:
        """The shape of every parameter, named like :meth:`named_parameters`, for the
        arguments ``config``."""
        return {f"{name}.{key}": shape for name, (part, kwargs) in cls.parts(**config).items()
                for key, shape in part.parameter_shapes(kwargs).items()}

    def build(self, parts: dict) -> None:
        """Build ``parts`` (of :meth:`parts`) on this layer's runtime, as attributes."""
        self._parts = {name: part(**kwargs, runtime=self.runtime)
                       for name, (part, kwargs) in parts.items()}
        for name, module in self._parts.items():
            setattr(self, name, module)

    def named(self) -> dict:
        """The layers that hold parameters, by dotted name, parts of parts included."""
        out = {}
        for name, module in self._parts.items():
            inner = module.named() if isinstance(module, _Composite) else {"": module}
            out.update({f"{name}.{k}" if k else name: m for k, m in inner.items()})
        return out

    def named_parameters(self) -> dict:
        return {f"{name}.{p.name}": p for name, m in self.named().items()
                for p in m.parameters()}

    def parameters(self) -> list:
        return [p for m in self.named().values() for p in m.parameters()]

    def release(self) -> None:
        super().release()
        for m in self.named().values():
            m.release()


class TransformerBlock(_Composite):
    """One pre-norm channel-masked transformer layer: ``forward(h, mask)``;
    ``backward(dh, mask_grad, first, dc_weight)`` also adds the mask's gradient (written,
    not added, by the ``first`` block backward meets) and the dc loss's gradients. The
    residual sums of ``backward`` accumulate in ``dh`` itself, which it returns."""

    @staticmethod
    def parts(cf, heads, head_dim, d_ff, seed=0, **_) -> dict:
        inner = heads * head_dim
        return {"norm1": (LayerNorm, dict(width=cf)),
                "qkv": (Dense, dict(n_in=cf, n_out=3 * inner, seed=seed)),
                "out": (Dense, dict(n_in=inner, n_out=cf, seed=seed + 1)),
                "norm2": (LayerNorm, dict(width=cf)),
                "ff1": (Dense, dict(n_in=cf, n_out=d_ff, seed=seed + 2)),
                "ff2": (Dense, dict(n_in=d_ff, n_out=cf, seed=seed + 3))}

    def __init__(self, cf, heads, head_dim, d_ff, fill, tau, reg, seed, runtime, dc=True):
        super().__init__(runtime)
        rt = self.runtime
        self.build(self.parts(cf, heads, head_dim, d_ff, seed))
        self.gelu = GELU(rt)
        self.attention = MaskedAttention(heads, fill, rt)
        self.dc = ChannelDCLoss(heads, tau, reg, rt) if dc else None

    def forward(self, h, mask):
        h, f = self.forward_parts(h, mask)
        return add(self.runtime, h, f)

    def forward_parts(self, h, mask, branch=None):
        """(h', f), whose sum is the block's output, on the input h (h + ``branch`` where
        given: the previous block's parts, summed by the layer norm that reads them)."""
        rt, groups, n = self.runtime, mask.shape[0], mask.shape[1]
        if branch is None:
            normed = self.norm1.forward(h)
        else:
            h, normed = self.norm1.forward_sum(h, branch)
        qkv = rt.reshape(self.qkv.forward(normed), groups, n, -1)
        if self.dc is not None:
            self.dc_rows = self.dc.forward(qkv, mask)
        att = rt.reshape(self.attention.forward(qkv, mask), groups * n, -1)
        h, normed = self.norm2.forward_sum(h, self.out.forward(att))
        f = self.ff2.forward(self.gelu.forward(self.ff1.forward(normed)))
        self.save_for_backward(mask)
        return h, f

    def backward(self, grad_out, mask_grad, first: bool, dc_weight: float):
        (mask,) = self.saved()
        rt, dh = self.runtime, grad_out
        d = self.ff1.backward(self.gelu.backward(self.ff2.backward(dh)))
        dh = self.norm2.backward(d, into=dh)  # the residual sums, in place
        datt = rt.reshape(self.out.backward(dh), mask.shape[0], mask.shape[1], -1)
        dqkv = self.attention.backward(datt, mask_grad, accumulate=not first, dc=self.dc,
                                       dc_weight=dc_weight)
        d = self.qkv.backward(rt.reshape(dqkv, -1, dqkv.shape[-1]))
        return self.norm1.backward(d, into=dh)


class _Head(_Composite):
    """CATCH's Flatten_Head: 3 x { v = relu(Dense v) + v }, then Dense(nf -> T)."""

    @staticmethod
    def parts(nf, t, seed=0) -> dict:
        return {**{f"res{j}": (Dense, dict(n_in=nf, n_out=nf, activation="relu", seed=seed + j))
                   for j in range(3)},
                "out": (Dense, dict(n_in=nf, n_out=t, seed=seed + 3))}

    def __init__(self, nf, t, seed, runtime):
        super().__init__(runtime)
        self.build(self.parts(nf, t, seed))
        self.res = [self.res0, self.res1, self.res2]

    def forward(self, v):
        for r in self.res:
            v = add(self.runtime, r.forward(v), v)
        self.save_for_backward()
        return self.out.forward(v)

    def backward(self, grad_out):
        self.saved()
        d = self.out.backward(grad_out)
        for r in reversed(self.res):  # the residual sum d + dL/dv of the branch, in place
            r.backward(d, into=d)
        return d


class CATCHNet(_Composite):
    """The graph of the module docstring with its parameters: ``forward(x, noise)`` keeps
    what ``backward`` needs, and ``backward`` adds the loss gradients to the parameters."""

    @staticmethod
    def parts(n_channels, window, patch_size, patch_stride, cf_dim, e_layers, n_heads,
              head_dim, d_ff, d_model, projection, mask_fill, gumbel, temperature,
              regular_lambda, seed=0, mask_input="spectrum", dc_source="attention") -> dict:
        n, t, p, s = n_channels, window, patch_size, patch_stride
        if projection == "linear":
            embed = (Dense, dict(n_in=2 * p, n_out=cf_dim, seed=seed))
        else:
            embed = (ComplexConv1d, dict(window=p, step=s, filters=cf_dim // 2, variables=n,
                                         shared=True, layout="tokens", seed=seed))
        width = 2 * d_model
        nf = ((t - p) // s + 1) * width
        return {"embed": embed,
                "mask_generator": (MaskGenerator, dict(
                    n=n, width=p if mask_input == "amplitude" else 2 * p, gumbel=gumbel)),
                **{f"layer{i}": (TransformerBlock, dict(
                    cf=cf_dim, heads=n_heads, head_dim=head_dim, d_ff=d_ff, fill=mask_fill,
                    tau=temperature, reg=regular_lambda, seed=seed + 10 * (i + 1),
                    dc=dc_source == "attention")) for i in range(e_layers)},
                "to_model": (Dense, dict(n_in=cf_dim, n_out=width, seed=seed + 100)),
                "get_r": (Dense, dict(n_in=width, n_out=width, seed=seed + 101)),
                "get_i": (Dense, dict(n_in=width, n_out=width, seed=seed + 102)),
                "head_real": (_Head, dict(nf=nf, t=t, seed=seed + 110)),
                "head_imag": (_Head, dict(nf=nf, t=t, seed=seed + 120)),
                "ircom": (Dense, dict(n_in=2 * t, n_out=t, seed=seed + 130))}

    def __init__(self, n_channels, window, patch_size, patch_stride, cf_dim, e_layers,
                 n_heads, head_dim, d_ff, d_model, projection, mask_fill, gumbel,
                 temperature, regular_lambda, seed, runtime, mask_input="spectrum",
                 dc_source="attention"):
        super().__init__(runtime)
        if dc_source not in DC_SOURCES:
            raise ValueError(f"unknown dc_source {dc_source!r}; choose one of {DC_SOURCES}")
        if mask_input not in MASK_INPUTS:
            raise ValueError(f"unknown mask_input {mask_input!r}; choose one of {MASK_INPUTS}")
        if projection not in PROJECTIONS:
            raise ValueError(f"unknown projection {projection!r}; choose one of {PROJECTIONS}")
        if projection == "complex" and cf_dim % 2:
            raise ValueError(f"the complex projection needs an even cf_dim, got {cf_dim}")
        rt = self.runtime
        n, t, p, s = n_channels, window, patch_size, patch_stride
        self.n, self.t, self.p, self.s = n, t, p, s
        self.patches = (t - p) // s + 1
        self.projection, self.mask_input, self.dc_source = projection, mask_input, dc_source
        # the "patches" deviation: one dc loss on the cosines of the input patches
        self.patch_dc = ChannelDCLoss(1, temperature, regular_lambda, rt) \
            if dc_source == "patches" else None
        self.build(self.parts(n, t, p, s, cf_dim, e_layers, n_heads, head_dim, d_ff, d_model,
                              projection, mask_fill, gumbel, temperature, regular_lambda,
                              seed, mask_input, dc_source))
        self.blocks = [getattr(self, f"layer{i}") for i in range(e_layers)]
        self.ifft = fft.FFT(inverse=True, runtime=rt)
        # each group end to end in one buffer: its optimizer updates it in one launch
        self.layouts = [FlatLayout.lay_out(g) for g in self.parameter_groups()]

    def parameter_groups(self) -> tuple:
        """(main network's, mask generator's) parameters: CATCH trains them apart."""
        params = self.named_parameters()
        return ([p for k, p in params.items() if not k.startswith("mask_generator")],
                [p for k, p in params.items() if k.startswith("mask_generator")])

    def forward(self, x, noise=None):
        """x (B, N, T) device array, logistic noise (B L, N, N) for the mask sampler (None:
        the mask thresholded at 0.5) -> xhat (B, N, T); keeps the state."""
        rt = self.runtime
        b, n, t = x.shape
        xn, mean, std = revin_norm(rt, x)
        spec = fft.fft(fft.to_complex(xn, rt), runtime=rt)
        z = freq_patches(rt, spec, self.p, self.s)  # (B, L, N, 2P)
        groups = b * self.patches
        mg_in = rt.reshape(z, groups, n, 2 * self.p)
        if self.mask_input == "amplitude":
            mg_in = patch_amplitude(rt, mg_in)
        self.mask = self.mask_generator.forward(mg_in, noise)
        if self.patch_dc is not None:  # q = k = the patch: cosines of the channels' inputs
            rows = z.reshape(groups * n, 2 * self.p)
            qkv = join_rows(rt, join_rows(rt, rows, rows), rt.zeros(rows.shape))
            self.patch_dc_rows = self.patch_dc.forward(qkv.reshape(groups, n, -1), self.mask)
        if self.projection == "linear":
            h = self.embed.forward(rt.reshape(z, groups * n, 2 * self.p))
        else:
            c = fft.re_im(self.embed.forward(spec), rt)  # (B, N, L, cf)
            h = swap_axes12(rt, c).reshape(groups * n, -1)
        f = None
        for block in self.blocks:
            h, f = block.forward_parts(h, self.mask, f)
        hm = self.to_model.forward(add(rt, h, f))
        parts = []
        for get, head in ((self.get_r, self.head_real), (self.get_i, self.head_imag)):
            v = rt.reshape(get.forward(hm), b, self.patches, n, -1)
            parts.append(head.forward(rt.reshape(swap_axes12(rt, v), b * n, -1)))
        self.spectrum = z = join_complex(rt, *parts)  # (B N, T) complex: Z, kept to show
        rec = self.ifft.forward(z)
        y = self.ircom.forward(fft.re_im(rec, rt))
        self.save_for_backward(mean, std, spec, z)
        return rt.reshape(revin_denorm(rt, y, mean, std), b, n, t)

    def backward(self, grad_out, auxi_weight: float, dc_weight: float):
        """From dL/dxhat; adds auxi_weight * d sum|Z - FFT(xn)| and dc_weight * d (sum of
        the layers' dc rows). Returns the frequency errors (B N, T) for the loss value."""
        mean, std, spec, z = self.saved()
        rt = self.runtime
        b, n, t = grad_out.shape
        dy = revin_denorm(rt, rt.reshape(grad_out, b * n, t), mean, std, shift=False)
        drec = fft.from_re_im(self.ircom.backward(dy), rt)
        err, dre, dim = freq_mae(rt, z, rt.reshape(spec, b * n, t), self.ifft.backward(drec),
                                 auxi_weight)
        dhm = None
        for d, get, head in ((dre, self.get_r, self.head_real), (dim, self.get_i, self.head_imag)):
            dv = rt.reshape(head.backward(d), b, n, self.patches, -1)
            dhm = get.backward(rt.reshape(swap_axes12(rt, dv), b * self.patches * n, -1),
                             into=dhm)
        dh = self.to_model.backward(dhm)
        dmask = rt.empty(self.mask.shape)
        for i, block in enumerate(reversed(self.blocks)):
            dh = block.backward(dh, dmask, first=i == 0, dc_weight=dc_weight)
        if self.projection == "linear":
            self.embed.backward_preactivation(dh, input_grad=False)
        else:
            dc = swap_axes12(rt, dh.reshape(b, self.patches, n, -1))
            self.embed.backward(fft.from_re_im(dc, rt))
        if self.patch_dc is not None:  # one loss instead of one per layer
            qkv = self.patch_dc.saved()[0]
            self.patch_dc.backward(dc_weight * len(self.blocks), rt.empty(qkv.shape), dmask)
        self.mask_generator.backward(dmask)
        self.mask_grad = dmask
        return err

    def dc_loss(self) -> DeviceLoss:
        """The mean over layers of each layer's clustering + regular loss (last forward)."""
        rows = [self.patch_dc_rows] if self.patch_dc is not None else \
            [block.dc_rows for block in self.blocks]
        total = rows[0]
        for r in rows[1:]:
            total = add(self.runtime, total, r)
        return DeviceLoss(total, rows[0].shape[0] * len(rows))
