"""The planted mistakes each puzzle's check must recognise: (solution text, mistaken text, what
the report must say), the text replaced inside the puzzle's kernel in puzzles/solutions/.
NO_REUSE holds, for each puzzle with a budget, a correct kernel body that ignores the point of
the puzzle (no local memory, or no reuse of what was loaded): its budget must fail."""

RACE = "a data race"
OUT_OF_BOUNDS = "an access out of bounds"
PAST_END = "wrote past the end"

MISTAKES = {
    "map": [
        ("out[i] = a[i] + 10.0f;", "out[i] = a[i];", "out holds a: add 10 to each value"),
        ("out[i] = a[i] + 10.0f;", "out[i] = a[i] * 10.0f;", "you multiplied by 10: add it"),
        ("int i = get_global_id(0);", "int i = get_local_id(0);",
         "each work-item writes the element of its global id"),
    ],
    "zip": [
        ("out[i] = a[i] + b[i];", "out[i] = a[i] + a[i];", "add b[i], not a[i] twice"),
        ("out[i] = a[i] + b[i];", "out[i] = a[i] - b[i];", "you computed a - b"),
        ("out[i] = a[i] + b[i];", "out[i] = b[i];", "out holds b only: add a[i]"),
    ],
    "guard": [
        ("if (i < n)", "", PAST_END),
        ("if (i < n)", "if (i <= n)", PAST_END),
        ("if (i < n)", "if (i < n - 1)", "the last one (i = n - 1) included"),
        ("out[i] = a[i] + 10.0f;", "out[i] = a[i];", "out holds a: add 10 to each value"),
    ],
    "map2d": [
        ("if (r < rows && c < cols)", "if (r < rows)", PAST_END),
        ("out[r * cols + c] = a[r * cols + c] + 10.0f;",
         "out[r * cols + c] = a[c * rows + r] + 10.0f;", "element (r, c) is at r * cols + c"),
        ("int c = get_global_id(0), r = get_global_id(1);",
         "int r = get_global_id(0), c = get_global_id(1);",
         "get_global_id(0) is the column c"),
    ],
    "broadcast": [
        ("a[c] + b[r]", "a[r] + b[c]", "a is indexed by the column c, b by the row r"),
        ("a[c] + b[r]", "a[c] + b[c]", "b is indexed by the row r"),
        ("a[c] + b[r]", "a[c] * b[r]", "you multiplied: add a[c] and b[r]"),
        ("if (r < rows && c < cols)", "if (r < rows)", PAST_END),
    ],
    "window": [
        ("barrier(CLK_LOCAL_MEM_FENCE);", "", RACE),
        ("out[i] = tile[l] + tile[l + 1] + tile[l + 2];", "out[i] = tile[l + 1] + tile[l + 2];",
         "sum three values"),
        ("    if (l < 2)\n        tile[l] = i >= 2 && i - 2 < n ? a[i - 2] : 0.0f;\n", "",
         "only the first two outputs of work-groups are wrong"),
        ("tile[l + 2] = i < n ? a[i] : 0.0f;", "tile[l + 2] = a[i];", OUT_OF_BOUNDS),
    ],
    "reverse": [
        ("barrier(CLK_LOCAL_MEM_FENCE);", "", RACE),
        ("out[start + l] = tile[len - 1 - l];", "out[start + l] = tile[l];",
         "out holds a unchanged"),
        ("out[start + l] = tile[len - 1 - l];",
         "out[start + l] = tile[get_local_size(0) - 1 - l];",
         "only the last, shorter block is wrong"),
    ],
    "sum": [
        ("    barrier(CLK_LOCAL_MEM_FENCE);\n    }", "    }", RACE),
        ("for (int s = get_local_size(0) / 2; s > 0; s /= 2)",
         "for (int s = get_local_size(0) / 2; s > 1; s /= 2)", "the last halving step"),
        ("scratch[l] = i < n ? a[i] : 0.0f;", "scratch[l] = a[i];", OUT_OF_BOUNDS),
        ("scratch[l] += scratch[l + s];", "scratch[l] = fmax(scratch[l], scratch[l + s]);",
         "you took the maximum: add the values"),
    ],
    "max": [
        ("scratch[l] = i < n ? a[i] : -INFINITY;", "scratch[l] = i < n ? a[i] : 0.0f;",
         "0 is not the identity of max"),
        ("scratch[l] = fmax(scratch[l], scratch[l + s]);", "scratch[l] += scratch[l + s];",
         "you summed: take fmax"),
        ("scratch[l] = fmax(scratch[l], scratch[l + s]);",
         "scratch[l] = fmin(scratch[l], scratch[l + s]);", "fmax, not fmin"),
        ("    barrier(CLK_LOCAL_MEM_FENCE);\n    }", "    }", RACE),
    ],
    "dot": [
        ("scratch[l] = i < n ? a[i] * b[i] : 0.0f;", "scratch[l] = i < n ? a[i] + b[i] : 0.0f;",
         "multiply a[i] by b[i]"),
        ("scratch[l] = i < n ? a[i] * b[i] : 0.0f;", "scratch[l] = i < n ? a[i] : 0.0f;",
         "you summed a only"),
        ("scratch[l] = i < n ? a[i] * b[i] : 0.0f;", "scratch[l] = a[i] * b[i];", OUT_OF_BOUNDS),
        ("    barrier(CLK_LOCAL_MEM_FENCE);\n    }", "    }", RACE),
    ],
    "scan": [
        ("        barrier(CLK_LOCAL_MEM_FENCE);\n        scratch[l] += left;",
         "        scratch[l] += left;", RACE),
        ("out[i] = scratch[l];", "out[i] = l > 0 ? scratch[l - 1] : 0.0f;",
         "out[i] includes a[i] itself"),
        ("scratch[l] = i < n ? a[i] : 0.0f;", "scratch[l] = a[i];", OUT_OF_BOUNDS),
    ],
    "transpose": [
        ("barrier(CLK_LOCAL_MEM_FENCE);", "", RACE),
        ("tile[x * (t + 1) + y]", "tile[y * (t + 1) + x]", "read the tile transposed"),
        ("if (c0 + y < cols && r0 + x < rows)", "", PAST_END),
    ],
    "matmul": [
        ("            acc += ta[y * t + q] * tb[q * t + x];\n        barrier(CLK_LOCAL_MEM_FENCE);",
         "            acc += ta[y * t + q] * tb[q * t + x];", RACE),
        ("row < m && k0 + x < k ? a[row * k + k0 + x] : 0.0f",
         "row < m ? a[row * k + k0 + x] : 0.0f", OUT_OF_BOUNDS),
        ("if (row < m && col < n)", "", PAST_END),
        ("acc += ta[y * t + q] * tb[q * t + x];", "acc += ta[y * t + q] * tb[x * t + q];",
         "c[r, col] = sum_q a[r, q] b[q, col]"),
    ],
    "histogram": [
        ("atomic_inc(&counts[values[i]]);", "counts[values[i]]++;", RACE),
        ("atomic_inc(&counts[values[i]]);", "counts[values[i]] = 1;",
         "count every value: add 1 atomically, do not set 1"),
        ("atomic_inc(&counts[values[i]]);", "atomic_add(&counts[values[i]], values[i]);",
         "add 1 per value, not the value itself"),
    ],
    "butterfly": [
        ("float2 t = (float2)(w.x * b.x - w.y * b.y, w.x * b.y + w.y * b.x);",
         "float2 t = (float2)(w.x * b.x + w.y * b.y, w.x * b.y - w.y * b.x);",
         "conjugating it gives the inverse"),
        ("tw[k * (n / (2 * s))]", "tw[k]", "the twiddle index is k * n / (2 * s)"),
        ("float2 t = (float2)(w.x * b.x - w.y * b.y, w.x * b.y + w.y * b.x);", "float2 t = b;",
         "no twiddle"),
        ("    if (j >= n / 2)\n        return;\n", "", PAST_END),
    ],
    "softmax": [
        ("    top = scratch[0];\n    barrier(CLK_LOCAL_MEM_FENCE);", "    top = scratch[0];",
         RACE),
        ("        sum += exp(xr[c] - top);", "        sum += exp(xr[c]);",
         "subtract the row's largest value before exp"),
        ("y[r * cols + c] = exp(xr[c] - top) / total;", "y[r * cols + c] = exp(xr[c] - top);",
         "divide by the row's sum"),
    ],
}

NO_REUSE = {  # puzzle -> (a correct body without the puzzle's memory discipline, the budget line)
    "window": ("""
    int i = get_global_id(0);
    if (i < n)
        out[i] = (i >= 2 ? a[i - 2] : 0.0f) + (i >= 1 ? a[i - 1] : 0.0f) + a[i];
""", "global loads per work-item"),
    "reverse": ("""
    int l = get_local_id(0), start = get_group_id(0) * get_local_size(0);
    int len = min((int)get_local_size(0), n - start);
    if (l < len)
        out[start + l] = a[start + len - 1 - l];
""", "local loads per element written"),
    "sum": ("""
    int start = get_group_id(0) * get_local_size(0);
    if (get_local_id(0) == 0) {
        float s = 0.0f;
        for (int j = start; j < min(n, start + (int)get_local_size(0)); ++j)
            s += a[j];
        partial[get_group_id(0)] = s;
    }
""", "local stores per work-item"),
    "max": ("""
    int start = get_group_id(0) * get_local_size(0);
    float top = -INFINITY;
    for (int j = start; j < min(n, start + (int)get_local_size(0)); ++j)
        top = fmax(top, a[j]);
    if (get_local_id(0) == 0)
        partial[get_group_id(0)] = top;
""", "global loads per work-item"),
    "dot": ("""
    int start = get_group_id(0) * get_local_size(0);
    if (get_local_id(0) == 0) {
        float s = 0.0f;
        for (int j = start; j < min(n, start + (int)get_local_size(0)); ++j)
            s += a[j] * b[j];
        partial[get_group_id(0)] = s;
    }
""", "local stores per work-item"),
    "scan": ("""
    int i = get_global_id(0), start = get_group_id(0) * get_local_size(0);
    float s = 0.0f;
    for (int j = start; j <= i && j < n; ++j)
        s += a[j];
    if (i < n)
        out[i] = s;
""", "global loads per work-item"),
    "transpose": ("""
    int c = get_global_id(0), r = get_global_id(1);
    if (r < rows && c < cols)
        out[c * rows + r] = a[r * cols + c];
""", "local loads per element written"),
    "matmul": ("""
    int col = get_global_id(0), row = get_global_id(1);
    if (row < m && col < n) {
        float acc = 0.0f;
        for (int q = 0; q < k; ++q)
            acc += a[row * k + q] * b[q * n + col];
        c[row * n + col] = acc;
    }
""", "global loads per work-item"),
    "softmax": ("""
    int r = get_group_id(0), l = get_local_id(0), size = get_local_size(0);
    global const float *xr = x + r * cols;
    float top = -INFINITY, sum = 0.0f;
    for (int c = 0; c < cols; ++c)
        top = fmax(top, xr[c]);
    for (int c = 0; c < cols; ++c)
        sum += exp(xr[c] - top);
    for (int c = l; c < cols; c += size)
        y[r * cols + c] = exp(xr[c] - top) / sum;
""", "global loads per element"),
}
