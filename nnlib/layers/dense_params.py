"""The tuning parameters of the blocked dense kernels (kernels/dense.cl, gemm_nt and
gemm_tn): what the tuner tries and what runs without tuning (``dense_blocked.measure`` times
one set).

Taught in notebooks/03_cpu_vs_gpu.
"""

from __future__ import annotations

from ..sizes import ceil_div, vector_width

PRODUCTS = ("forward", "input", "weight")  # the three products of the blocked design
# Batch classes: the tile that suits batch 64 wastes most of its rows on batch 1, so each
# class is tuned on its own representative problem, (batch, n -> n) in TUNE_SHAPE. Batch
# 64 at 1024 -> 1024: rows 4 KiB apart map to the same few cache sets, which the gradients'
# tiles must survive (at 512 the tuner chose tiles that lost at 1024).
BATCH_CLASSES = ((1, "b1"), (4, "b4"), (None, "b64"))
# Layers of at least WIDE_WEIGHTS weights (CATCH's flatten heads at the official sizes:
# 5888 x 5888 on 640 rows, a batch of 128 windows of 5 channels) are their own class, tuned
# on (640, 2048 -> 2048): their operands no longer fit the caches, and the tile order that
# wins at 512 loses there. The input gradient on W packed into panels lost at 256 rows and
# won at 640 (by 18-27 % on both PoCLs of an Intel Xeon): its pass over W pays with rows.
# Layers of at most SMALL_WEIGHTS weights at batches above 4 and below TALL_BATCH
# (notebook 02's 240 -> 128 -> 64 -> 3 at batches of 64) are the class "small", tuned on
# (64, 128 -> 128): a launch there costs as much as the arithmetic, and a step the tuner
# buys at 1024 -> 1024 (a transpose before or after a product) may not pay for itself. At
# TALL_BATCH rows and more (CATCH's layers: 320-1920 rows of 16-288 features) they are the
# class "tall", tuned on (1920, 32 -> 32), CATCH's token layers: there k may be as short as
# 32, which gemm_nt's horizontal sums pay for, and a launch more (FWD_TN's transpose of W)
# costs little beside the product. Each class's problem lies in the class: tuned on 512
# rows, "small" took work-groups of 256 for its input gradient on Intel's runtime, which at
# 64 rows ran 1.6x slower than the lanes design.
WIDE_WEIGHTS = 2048 * 2048
SMALL_WEIGHTS = 256 * 256
TALL_BATCH = 256
TUNE_SHAPE = {"b1": (1, 512), "b4": (4, 512), "b64": (64, 1024), "small": (64, 128),
              "tall": (1920, 32), "wide": (640, 2048)}
# Problems a class is also timed on, their times added to its own problem's: "tall" takes
# CATCH's two kinds of layer, the token layers (1920 rows of 32 features) and the head's
# and feed-forward layers (320 rows of 192), which carry most of a step's arithmetic and
# whose gradients' best tiles differ (the input gradient's local-memory k-blocks pay at 32
# features and cost at 192); "b64" also 512 -> 512 (nnlib.bench.train_step's MLP is 240 ->
# 512 -> 256 -> 3), where a transpose before or after the product, which may pay at 1024,
# costs more than it saves. The larger problem's time still weighs most.
TUNE_ALSO = {"tall": ((320, 192),), "b64": ((64, 512),)}
# The activation of each class's problem: tanh (the article's), but ReLU for "tall": CATCH's
# layers have none or ReLU, and 61,440 tanh a launch would outweigh the product it tunes.
TUNE_ACTIVATION = {"tall": "relu"}
WIDTHS = (4, 8, 16)  # dense.cl's VW: its tiles sum the lanes four at a time (sum_lanes4)
# parameters of the launch, not build options
LAUNCH_KEYS = ("LOCAL", "LOCAL_J", "DZT", "FWD_YT", "FWD_TN")


# gemm_tn's split of k (dimension 2 of its launch, dense.cl's k_slice): a product of few
# tiles over a long k (CATCH's weight gradients: 16-288 features, summed over thousands of
# rows) fills a handful of a GPU's multiprocessors, each walking all of k. Split, its slices
# run side by side and a second launch adds them up; each slice at least MIN_K_SLICE long,
# so that the partial products' traffic stays a fraction of the arithmetic.
MIN_K_SLICE = 64
MAX_K_SLICES = 64


def k_slices(compute_units: int, groups: int, nk: int) -> int:
    """How many slices of k a gemm_tn launch of ``groups`` work-groups runs in: enough
    for two work-groups per compute unit, each slice at least MIN_K_SLICE long (1: all of k
    in one, which is also the answer wherever there are enough work-groups)."""
    want = ceil_div(2 * compute_units, max(groups, 1))
    return max(1, min(want, nk // MIN_K_SLICE, MAX_K_SLICES))


def shape_class(product: str, batch: int, weights: int = 0) -> str:
    """The class whose tuned parameters ``product`` uses at ``batch`` on a layer of
    ``weights`` weights (n_in * n_out): "wide" by the weights; "small" or (at TALL_BATCH
    rows and more) "tall" for small layers at batches above 4; else by the batch. dW sums
    over the batch (its tile runs along n_out and n_in): at batches up to 4 it takes the
    class of batch 64."""
    if weights >= WIDE_WEIGHTS:
        return "wide"
    shape = "b64" if product == "weight" else next(
        name for limit, name in BATCH_CLASSES if limit is None or batch <= limit)
    if shape != "b64" or not 0 < weights <= SMALL_WEIGHTS:
        return shape
    return "tall" if batch >= TALL_BATCH else "small"


def _tn_tile(vw: int, shape: str, few_registers: bool = False) -> tuple:
    """gemm_tn's tile (TN_R rows, TN_V vectors of vw floats): 6 rows of 16 columns (two AVX2
    registers a row, the classic 6 x 16 CPU micro-kernel, 12 accumulators), at least one
    vector; at width 16 (AVX-512, 32 registers) 4 rows of 4 vectors, 16 accumulators (6 rows
    of one vector left the wide registers waiting on their loads, 7 per 6 FMAs), except in
    the wide class, whose tiles were measured at 16 columns, and with ``few_registers``
    (``Limits.few_vector_registers``: a vector of 16 floats is two AVX2 registers)."""
    if vw >= 16 and shape != "wide" and not few_registers:
        return 4, 4
    return 6, max(1, 16 // vw)


# gemm_tn's k-block copied to local memory (0: none): the input gradient reads W's columns
# over all n_out rows, the weight gradient x's over the batch. A CPU's defaults copy them
# only for tiles of 16 columns (the input gradient's, and both gradients of a wide layer);
# the tuner tries them on the others.
K_BLOCK = {"input": 256, "weight": 64}
# gemm_nt's k-blocks the tuner tries on wide layers, on work-groups of LOCAL / NT_LOCAL_J x
# NT_LOCAL_J tiles (rows of x by rows of W).
NT_K_BLOCKS, NT_LOCAL_J = (512, 2048), 4


# The batch classes of at most 4 rows, whose forward takes no tiles of 3 rows of x.
FEW_ROWS = ("b1", "b4")


def default_params(rt, product: str, shape: str = "b64", lanes: bool | None = None) -> dict:
    """The parameters used without tuning (NNLIB_TUNE=0): measured good on PoCL CPUs.
    Work-groups of twice the device's preferred multiple: 64 on a GPU (or the GPU profile),
    two warps; 16 on PoCL's CPUs (multiple 8), which run a work-group as one task, where 16
    work-items of large tiles are plenty. A wide layer's weight gradient on a
    CPU walks its work-groups along the columns first (TN_ORDER 1): consecutive work-groups
    then share their rows of dZ in the cache. On a CPU a wide layer's forward takes tiles of
    6 rows of x (CATCH's heads: 640 x 5888 -> 5888) and its input gradient tiles of 32
    columns with k-blocks of 1024. A CPU whose compiler vectorises across work-items
    (``Limits.vectorises_across_work_items``) gets fma(), and its tiles take the widest
    vectors the compiler emits (``Limits.explicit_vector_width``), as its element-wise
    kernels do, not its preferred width of 1, with gemm_tn's k-blocks in local memory
    (without them Intel's runtime ran most of these tiles 15-20x slower). Vector loads by
    vloadN where the compiler inlines it (``Limits.inlines_vector_loads``), else a float at a
    time. The gradients of a device
    that vectorises across work-items (or a GPU) take the lanes design
    (:func:`lanes_params`), except with AVX2's 16 registers (``Limits.few_vector_registers``)
    beyond batch 1, where the lanes' 16 accumulators spill: there the gradients take 6 rows
    of one 16-float vector (on large layers the weight gradient's on dZ transposed first,
    DZT) and the forward 3 rows at width 8 (2 at batches up to 4), as :func:`register_tiles`;
    and except a CPU's wide class, where the lanes design is only a candidate (on Intel's
    runtime its gradients of the class's problem ran several times slower than the tiles,
    and a search that starts with them spends a process's seconds on them); ``lanes``
    False: the tiles whatever the device."""
    if lanes is None:
        spill = rt.limits.few_vector_registers and shape != "b1"  # b1's 1 x 8 fit
        lanes = lanes_by_default(rt) and not spill and not (shape == "wide" and not rt.is_gpu)
    if product != "forward" and lanes:
        return lanes_params(rt, product, shape)
    vw = vector_width(rt.vector_width, WIDTHS)
    explicit = rt.limits.vectorises_across_work_items and not rt.is_gpu
    few = rt.limits.few_vector_registers
    if explicit:
        vw = vector_width(rt.limits.explicit_vector_width, WIDTHS)
        if product == "forward" and few:  # 3 x 4 accumulators of 8 floats: 12 AVX2 registers
            vw = vector_width(vw // 2, WIDTHS)  # (and x's 3 and one of W's: all 16)
    common = {"VW": vw, "VLOAD": int(rt.limits.inlines_vector_loads),
              "FMA": int(rt.limits.vectorises_across_work_items),
              "LOCAL": 2 * rt.work_group_multiple}
    wide_cpu = shape == "wide" and not rt.is_gpu
    if product == "forward":
        many_rows = few and shape not in FEW_ROWS
        return {"NT_I": 6 if wide_cpu else 3 if many_rows else 2, **common}
    rows, vectors = _tn_tile(vw, shape, few)
    k_block = explicit or (not rt.is_gpu and vectors * vw <= 16
                           and (product == "input" or wide_cpu))
    out = {"TN_R": rows, "TN_V": vectors, "TN_KB": K_BLOCK[product] if k_block else 0,
           **common}
    if few:
        out["LOCAL"] = REGISTER_GROUP
    if few and product == "weight" and shape == "b64":  # large layers: see WEIGHT_REGISTER_GROUP
        out.update(DZT=1, LOCAL=WEIGHT_REGISTER_GROUP)
    if wide_cpu and product == "weight":
        out["TN_ORDER"] = 1
    if wide_cpu and product == "input":
        out["TN_V"] *= 2  # 32 columns
        if 4 * out["TN_KB"] * out["TN_V"] * vw * 4 <= rt.limits.local_mem_size:  # its panel
            out["TN_KB"] *= 4
    return out


def candidates(rt, product: str, shape: str) -> list:
    """The parameter sets the tuner tries for ``product`` on problems of batch class
    ``shape``; every one is a correct kernel (tests/test_dense.py runs them all).

    Most promising first (a search that runs out of time goes on from there next time): the
    default (so tuning never loses to no tuning), the tiles for AVX2's registers
    (:func:`register_tiles`), the default's loads by hand; tile rows suited to
    the batch class, each with vloadN and by hand, at the device's vector width; the middle
    tile at twice the width (half, at the widest); for the gradients, the default without
    and with other local-memory k-blocks (K_BLOCK's or four times it, and half of K_BLOCK,
    whose panel of 64 columns fits a 48 KiB L1 cache at the input gradient's 128 rows; each
    only where the device's local memory holds it) and with the work-groups in column
    order; for the weight gradient, the default on dZ transposed first (DZT), both load
    styles, and (right after the default) on dZ transposed and x packed into panels
    (TN_PACKED), for a wide layer also with the larger batches' tile (4 rows of 4 vectors
    at width 16, where the wide class's default is 6 rows of one); for a wide layer's
    input gradient, the default on W packed into panels (TN_PACKED: a pass over W each
    backward, which only a wide layer's product pays back); for a wide layer's
    forward, the default with k-blocks (NT_KB, work-groups spanning rows of x and of W);
    for the forward of the classes of FORWARD_YT_TILES, gemm_tn on Y^T (FWD_YT)
    with tiles of 6 and 8 rows of 2 vectors, the first also with the other load style and at
    the other width (as many columns), and gemm_tn_bias on x in place (FWD_TN, the classes
    of FORWARD_TN_CLASSES) with tiles of 6 rows of 2 vectors (a wide layer's: the input
    gradient's default, also in column order); the default with fma()
    (without, where the default has it) and with a work-group four times larger.
    Few candidates: each costs PoCL a compilation of 1-3 s on first use."""
    rows = {"b1": (1, 2), "b4": (2, 4), "b64": (2, 4, 6), "small": (2, 4, 6),
            "tall": (2, 4, 6), "wide": (2, 4, 6)}[shape]
    if product == "forward" and shape not in FEW_ROWS:  # 3: 12 accumulators at AVX2's width
        rows = (2, 3, 4, 6)
    base = default_params(rt, product, shape, lanes=False)
    if product == "weight":  # rows of dW (n_out), whatever the batch; 6 x 4 vectors at most
        rows = (4, 6, 8) if base["TN_V"] < 4 else (4, 6)
    wide = vector_width(2 * base["VW"], WIDTHS, rt.limits.widest_vector)
    if wide == base["VW"]:  # already the widest the compiler emits: half as wide instead
        wide = vector_width(base["VW"] // 2, WIDTHS)

    def tile(r, vw):
        if product == "forward":
            return {"NT_I": r, "VW": vw}
        return {"TN_R": r, "TN_V": _tn_tile(vw, shape, rt.limits.few_vector_registers)[1],
                "VW": vw}

    out = [base, *register_tiles(rt, product, base, shape), default_params(rt, product),
           dict(base, VLOAD=0)]
    out += [dict(base, **tile(r, base["VW"]), VLOAD=v) for r in rows for v in (1, 0)]
    out.append(dict(base, **tile(rows[len(rows) // 2], wide), VLOAD=0))
    if product != "forward":
        other = 4 * K_BLOCK[product] if base["TN_KB"] == K_BLOCK[product] else K_BLOCK[product]
        half = K_BLOCK[product] // 2  # half the rows: a panel that fits a smaller L1 cache
        panel = base["TN_V"] * base["VW"] * 4  # bytes of local memory per row of a k-block
        out += [dict(base, TN_KB=kb, VLOAD=v) for kb in (0, other, half) for v in (1, 0)
                if kb != base["TN_KB"] and kb * panel <= rt.limits.local_mem_size]
        out.append(dict(base, TN_ORDER=1))
    if product == "weight":
        out += [dict(base, DZT=1, VLOAD=v) for v in (1, 0)]
        packed = [dict(base, DZT=1, TN_PACKED=1, TN_KB=0)]
        r, v = _tn_tile(base["VW"], "b64", rt.limits.few_vector_registers)
        if shape == "wide" and (r, v) != (base["TN_R"], base["TN_V"]):  # packed: 4 x 4 too
            packed.append(dict(packed[0], TN_R=r, TN_V=v))
        at = out.index(base) + 1
        out[at:at] = packed
    if product == "input" and shape == "wide":  # W packed each backward: a wide one's pays
        out.insert(out.index(base) + 1, dict(base, TN_PACKED=1, TN_KB=0))
    if product == "forward" and shape == "wide":
        out += [dict(base, NT_KB=kb, LOCAL_J=NT_LOCAL_J) for kb in NT_K_BLOCKS]
    if product == "forward" and shape in FORWARD_YT_TILES:  # on Y^T: tiles of 2 vectors
        tn = dict({k: v for k, v in base.items() if k != "NT_I"}, TN_R=6, TN_V=2, TN_KB=0,
                  FWD_YT=1)
        out += [tn, dict(tn, VLOAD=1 - base["VLOAD"]),
                dict(tn, VW=wide, TN_V=max(1, 2 * base["VW"] // wide)), dict(tn, TN_R=8)]
    if product == "forward" and shape == "wide":  # gemm_tn_bias on x: the input's tiles
        tn = dict(default_params(rt, "input", shape, lanes=False), FWD_TN=1)
        out += [tn, dict(tn, TN_ORDER=1)]
    elif product == "forward" and shape in FORWARD_TN_CLASSES:  # gemm_tn_bias on x in place
        out.append(dict({k: v for k, v in base.items() if k != "NT_I"}, TN_R=6, TN_V=2,
                        TN_KB=0, FWD_TN=1))
    out += [dict(base, FMA=1 - base["FMA"]), dict(base, LOCAL=4 * base["LOCAL"])]
    if lanes_by_default(rt):  # the lanes design: its default first, the others last
        out = [default_params(rt, product, shape), *out, *lanes_candidates(rt, product, shape)]
    return [c for i, c in enumerate(out) if c not in out[:i]]


# The work-group of the gradients' tiles with few_vector_registers: 16 tiles of 6 rows, so
# that batch 64's 11 tiles share one group, which copies each k-block of B to local memory
# together; in groups of 256 work-items (twice Intel's preferred multiple), the 245 without
# rows slowed the copies and barriers: the input gradient at 1024 ran 1.6x slower.
REGISTER_GROUP = 16
# The weight gradient's on large layers (class b64), on dZ transposed first (DZT): its tiles
# run along dW's n_out rows, so a group of 64 tiles shares each copy of x's k-block among 384
# rows of dW. Under the AVX2 emulation (nnlib.bench.emulate) on Zen 4, 1024 -> 1024 at batch
# 64, it ran 5-20 % faster than groups of 16 on dZ, in each of six interleaved runs; on small
# layers (240 -> 128, 128 -> 64) the transpose's launch cost more than it saved: 30-50 %.
WEIGHT_REGISTER_GROUP = 64


# The work-group of the gradients' tiles of 2 rows of 2 vectors (register_tiles).
TWO_ROW_GROUP = 64


def register_tiles(rt, product: str, base: dict, shape: str) -> list:
    """Tiles for the 16 vector registers of an AVX2 CPU (``base`` with other tiles), on a
    compiler that vectorises across work-items (Intel's runtime; none elsewhere), where the
    lanes design's 16 accumulators and AVX-512's tiles spill. At the widest width w the
    compiler emits (16 floats, two AVX2 registers): the gradients' 6 rows of one vector (12
    AVX2 registers, the classic 6 x 16 micro-kernel), the weight gradient's on dZ transposed
    first (DZT), also on x packed into panels (TN_PACKED), and on dZ; the gradients' 2 rows
    of 2 vectors (8 AVX2 registers) in work-groups of TWO_ROW_GROUP, with k-blocks in local
    memory (half the input gradient's K_BLOCK, four times the weight gradient's, on dZ
    transposed): under the AVX2 emulation (nnlib.bench.emulate) of Intel's runtime on a Xeon
    they beat the 6 x 16 tiles at batch 64, 1024 -> 1024. First, at width w / 2, the
    gradients' 4 rows of 3 vectors (12 accumulators, and B's 3 vectors and a broadcast: all
    16 registers; 7 loads per 12 FMAs where 6 x 16 takes 8), in rows or (first) column
    order: the input gradient's with k-blocks of half K_BLOCK (not at batch 1), the weight
    gradient's with x packed into panels, on dZ transposed first (DZT) and on dZ, in groups
    of WEIGHT_REGISTER_GROUP; under that emulation the input gradient's ran at 143-150
    GFLOP/s where the 6 x 16 tiles' ran at 84-145, and the weight gradient's at par (on dZ
    transposed; on dZ 2-10 % slower at batch 64, 6-16 % at 128 and 256). The forward's 3
    rows of x at width w / 2 (12 accumulators of 4 rows of W; not in the classes of
    FEW_ROWS), 2 rows (8 accumulators) and 1 row at width w."""
    if not rt.limits.vectorises_across_work_items or rt.is_gpu:
        return []
    w = vector_width(rt.limits.explicit_vector_width, WIDTHS)
    if product == "forward":
        half = vector_width(w // 2, WIDTHS)
        rows = (2,) if shape in FEW_ROWS else (3, 2)
        return [*(dict(base, NT_I=r, VW=half) for r in rows), dict(base, NT_I=1, VW=w)]
    six = {k: v for k, v in base.items() if k != "DZT"} | {"TN_R": 6, "TN_V": 1, "VW": w}
    kb = K_BLOCK[product] // 2 if product == "input" else 4 * K_BLOCK[product]
    fits = kb * 2 * w * 4 <= rt.limits.local_mem_size  # its k-block's panel of 2 vectors
    two = [dict(six, TN_R=2, TN_V=2, LOCAL=TWO_ROW_GROUP, TN_KB=kb)] if fits else []
    three = dict(six, TN_R=4, TN_V=3, VW=vector_width(w // 2, WIDTHS))
    if product != "weight":
        three["TN_KB"] = K_BLOCK[product] // 2  # where its k-block's panel of 3 vectors fits
        if three["TN_KB"] * 3 * three["VW"] * 4 <= rt.limits.local_mem_size and shape != "b1":
            return [three, dict(three, TN_ORDER=1), six, *two]
        return [six, *two]
    three.update(TN_PACKED=1, TN_KB=0, LOCAL=WEIGHT_REGISTER_GROUP)
    threes = [dict(three, DZT=1, TN_ORDER=1), dict(three, TN_ORDER=1), dict(three, DZT=1),
              three]
    return [*threes, dict(six, DZT=1), dict(six, DZT=1, TN_PACKED=1, TN_KB=0), six,
            *(dict(c, DZT=1) for c in two)]


def lanes_by_default(rt) -> bool:
    """Whether the device runs neighbouring work-items in the lanes of one vector
    instruction: Intel's CPU runtime (``Limits.vectorises_across_work_items``) and GPUs. The
    lanes design (dense.cl's TN_LANES) is made for them: their gradients take it without
    tuning (except where its accumulators spill: ``Limits.few_vector_registers``), and the
    tuner tries it for every product."""
    return rt.limits.vectorises_across_work_items or rt.is_gpu


def lanes_work_group(rt) -> int:
    """The work-group size of the lanes design: one native float vector of a CPU that
    vectorises across work-items, two warps on a GPU."""
    if rt.limits.vectorises_across_work_items:
        return rt.limits.widest_vector
    return 2 * rt.work_group_multiple


# The lanes design's tiles per product and batch class, most promising first: the forward's
# rows of x per work-group (NT_I), the gradients' rows x columns per work-item (TN_R, TN_V).
LANES_TILES = {
    "forward": {"b1": (1, 2), "b4": (4, 2), "b64": (16, 8), "small": (16, 8), "tall": (16, 8),
                "wide": (16, 8)},
    "input": {"b1": ((1, 8), (1, 16), (2, 8)), "b4": ((4, 4), (2, 8)),
              **{shape: ((4, 4), (6, 4), (8, 2)) for shape in ("b64", "small", "tall", "wide")}},
    "weight": {shape: ((4, 4), (6, 4), (8, 2), (4, 6)) for shape in TUNE_SHAPE},
}


def lanes_params(rt, product: str, shape: str, tile=None) -> dict:
    """The lanes design's parameters for ``product`` on class ``shape``: ``tile`` (default
    the class's first) on work-groups of :func:`lanes_work_group` work-items."""
    tile = LANES_TILES[product][shape][0] if tile is None else tile
    out = {"TN_LANES": 1, "FMA": int(rt.limits.vectorises_across_work_items),
           "LOCAL": lanes_work_group(rt)}
    if product == "forward":
        return {**out, "NT_I": tile}
    return {**out, "TN_R": tile[0], "TN_V": tile[1]}


# The forward on Y^T (FWD_YT, dense.cl's gemm_tn on W read in place and X^T): its tiles in
# the lanes design (TN_R outputs x TN_V batch columns per work-item) per batch class, most
# promising first. C = Y^T has many rows and few columns (the batch: the lanes run along
# it), so only the classes of large batches (these keys) take it, in either design; not
# "small": tuned on one layer at batch 64, PyPI's PoCL took it by 8 %, and in notebook 02's
# steps its two transposes a layer (nine launches where three did) cost its epoch 15 %. Nor
# "wide": on its earlier tuning problem (256, 2048 -> 2048) it came within a few percent of
# gemm_nt, and Intel's runtime took it; at CATCH's official heads (640 rows, 5888 -> 5888)
# it then ran at half gemm_nt's speed there and on Debian's PoCL, and the official-size
# epoch 1.2x slower.
FORWARD_YT_TILES = {"b64": ((8, 2), (6, 4), (8, 4)), "tall": ((8, 2), (6, 4))}


# The forward by gemm_tn_bias on x read in place and W^T (FWD_TN): C = Y has the batch's
# rows, so only the classes of many rows take it. It skips gemm_nt's horizontal sums, which
# cost most where k (n_in) is short: CATCH's token layers of 32 features. A wide layer's
# forward is then the input gradient's product (P read in place, B of n_in x n_out rows),
# on its tiles and k-blocks, after a transpose of W each forward (the tuner times both).
FORWARD_TN_CLASSES = ("b64", "tall", "wide")


def forward_yt_params(rt, shape: str, tile=None, route: str = "FWD_YT") -> dict:
    """The forward on Y^T (FWD_YT), or with ``route`` "FWD_TN" by gemm_tn_bias on x, in the
    lanes design: ``tile`` (default the class's first of FORWARD_YT_TILES) on work-groups of
    :func:`lanes_work_group` work-items."""
    tile = FORWARD_YT_TILES[shape][0] if tile is None else tile
    return {"TN_LANES": 1, "FMA": int(rt.limits.vectorises_across_work_items),
            "LOCAL": lanes_work_group(rt), "TN_R": tile[0], "TN_V": tile[1], route: 1}


def lanes_candidates(rt, product: str, shape: str) -> list:
    """The lanes design's candidates: each tile of the class, the first also with fma()
    (without, where it has it) and on work-groups four times larger; for the forward of the
    classes of FORWARD_YT_TILES, then each of its tiles on Y^T (:func:`forward_yt_params`),
    and in FORWARD_TN_CLASSES the first of them (a wide layer's: the input gradient's first
    lanes tile) as gemm_tn_bias on x in place (FWD_TN)."""
    tiles = LANES_TILES[product][shape]
    out = [lanes_params(rt, product, shape, t) for t in tiles]
    first = out[0]
    out += [dict(first, FMA=1 - first["FMA"]), dict(first, LOCAL=4 * first["LOCAL"])]
    if product == "forward":
        out += [forward_yt_params(rt, shape, t) for t in FORWARD_YT_TILES.get(shape, ())]
    if product == "forward" and shape in FORWARD_TN_CLASSES:
        tile = None if shape in FORWARD_YT_TILES else LANES_TILES["input"][shape][0]
        out.append(forward_yt_params(rt, shape, tile, route="FWD_TN"))
    return out


def build_options(params: dict, kernel: str | None = None) -> tuple:
    """dense.cl's -D options for ``params``; with ``kernel``, also those that leave the
    other blocked kernels out (:func:`only_options`)."""
    out = tuple(f"-D{k}={v}" for k, v in sorted(params.items()) if k not in LAUNCH_KEYS)
    return out if kernel is None else out + only_options(kernel)


# dense.cl's large kernels, which a build holds only where it launches them (ONLY)
BLOCKED_KERNELS = ("gemm_nt", "gemm_tn", "gemm_tn_gated", "gemm_tn_bias", "gemm_tn_rowsum")


def only_options(kernel: str) -> tuple:
    """The options that build of dense.cl's BLOCKED_KERNELS only ``kernel``, which is one of
    them. (The split sums and pack_panels, which a gemm_tn kernel's launch runs with, are
    built with that kernel's options: one program.)"""
    return ("-DONLY", f"-DONLY_{kernel}")


# dense.cl's options for its small kernels (the article's, the transposes): no blocked kernel
SMALL_KERNELS = ("-DONLY",)


def small_options(rt) -> tuple:
    """SMALL_KERNELS for the transposes on ``rt``'s device: their float4 loads and stores one
    float at a time (VLOAD 0) where the compiler leaves vload4 / vstore4 as calls
    (``Limits.inlines_vector_loads``): PoCL 3.0 took 35 us to transpose 192 x 192 floats."""
    return SMALL_KERNELS + (() if rt.limits.inlines_vector_loads else ("-DVLOAD=0",))


def work_group(params: dict, limit: int) -> tuple:
    """The local size of a launch with ``params`` on a kernel of at most ``limit``
    work-items per group: LOCAL work-items, LOCAL_J of them along dimension 1 (gemm_nt's
    rows of W, with its k-blocks: the group then shares rows of both operands)."""
    size = min(params["LOCAL"], limit)
    lj = min(params.get("LOCAL_J", 1), size)
    return (size // lj, lj)
