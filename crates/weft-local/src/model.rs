//! The Gemma 3 forward pass over candle's quantized tensors, and its loading from GGUF.
//!
//! Written for Weft over `candle-core` and `candle-nn` ops (quantized matmul, RMS norm,
//! rotary embedding, softmax); it does not use candle-transformers. Shape of one block:
//!
//! ```text
//! x ─ rms(attn_norm) ─ q,k,v ─ rms(q_norm), rms(k_norm) ─ rope ─ attention ─ o ─ rms(post_attention_norm) ─ + ─┐
//! └──────────────────────────────────────────────────────────────────────────────────────────────────────────┘
//! x ─ rms(ffn_norm) ─ down(gelu_tanh(gate) · up) ─ rms(post_ffw_norm) ─ + (residual)
//! ```
//!
//! Five of every six layers attend within a sliding window (512 tokens, RoPE base 10 000); every
//! sixth layer attends globally (RoPE base from the file, 1 000 000). Embeddings are scaled by
//! `sqrt(d_model)`; the output projection is the tied embedding matrix.
//!
//! Choices that keep load under a few seconds and memory low:
//! - the tied 262k × 640 embedding stays quantized (Q8_0): lookups dequantize only the rows
//!   they need and the output projection is a quantized matmul, split by rows over the cores
//!   ([`RowSplit`]);
//! - rotary tables are computed for the positions a request can reach (prompt + max tokens),
//!   not for the model's whole context;
//! - Q5_0 weights are rewritten as Q8_0 at load time. The conversion is exact (the same
//!   scale; 5-bit values fit in 8 bits) and candle has SIMD kernels for Q8_0 but only a scalar
//!   one for Q5_0.

use std::borrow::Cow;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use std::sync::Arc;

use candle_core::quantized::gguf_file::{Content, Value as GgufValue};
use candle_core::quantized::{GgmlDType, QMatMul, QStorage, QTensor};
use candle_core::{DType, Device, Module as _, Tensor};
use candle_nn::kv_cache::KvCache;

use crate::tokenizer::{TokenKind, Tokenizer};

/// A failure while loading or running the model.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ModelError {
    /// Reading or parsing the file failed.
    #[error("cannot read {path}: {message}")]
    Read { path: String, message: String },
    /// The file is a GGUF of another architecture.
    #[error("{path} is a {architecture} model; the local provider runs gemma3 models only")]
    Architecture { path: String, architecture: String },
    /// Metadata is missing or has the wrong type.
    #[error("{path}: metadata {key}: {message}")]
    Metadata {
        path: String,
        key: String,
        message: String,
    },
    /// A tensor operation failed.
    #[error("inference failed: {0}")]
    Candle(#[from] candle_core::Error),
}

/// Hyper-parameters read from the GGUF metadata.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Config {
    pub(crate) layers: usize,
    pub(crate) d_model: usize,
    pub(crate) heads: usize,
    pub(crate) kv_heads: usize,
    pub(crate) head_dim: usize,
    pub(crate) eps: f64,
    pub(crate) rope_global: f64,
    pub(crate) rope_local: f64,
    pub(crate) rope_scale: f64,
    pub(crate) window: usize,
    pub(crate) sliding_pattern: usize,
    pub(crate) context_length: usize,
}

impl Config {
    fn is_sliding(&self, layer: usize) -> bool {
        self.sliding_pattern > 0 && !(layer + 1).is_multiple_of(self.sliding_pattern)
    }
}

struct Metadata<'a> {
    path: &'a str,
    content: &'a Content,
}

impl Metadata<'_> {
    fn error(&self, key: &str, message: impl Into<String>) -> ModelError {
        ModelError::Metadata {
            path: self.path.to_owned(),
            key: key.to_owned(),
            message: message.into(),
        }
    }

    fn get(&self, key: &str) -> Result<&GgufValue, ModelError> {
        self.content
            .metadata
            .get(key)
            .ok_or_else(|| self.error(key, "missing"))
    }

    fn usize(&self, key: &str) -> Result<usize, ModelError> {
        let value = self.get(key)?;
        let number = match value {
            GgufValue::U8(v) => u64::from(*v),
            GgufValue::U16(v) => u64::from(*v),
            GgufValue::U32(v) => u64::from(*v),
            GgufValue::U64(v) => *v,
            GgufValue::I32(v) => u64::try_from(*v).map_err(|_| self.error(key, "negative"))?,
            GgufValue::I64(v) => u64::try_from(*v).map_err(|_| self.error(key, "negative"))?,
            other => return Err(self.error(key, format!("expected an integer, got {other:?}"))),
        };
        usize::try_from(number).map_err(|_| self.error(key, "too large"))
    }

    fn f64_or(&self, key: &str, default: f64) -> Result<f64, ModelError> {
        match self.content.metadata.get(key) {
            None => Ok(default),
            Some(GgufValue::F32(v)) => Ok(f64::from(*v)),
            Some(GgufValue::F64(v)) => Ok(*v),
            Some(other) => Err(self.error(key, format!("expected a number, got {other:?}"))),
        }
    }

    fn string(&self, key: &str) -> Result<&str, ModelError> {
        match self.get(key)? {
            GgufValue::String(s) => Ok(s),
            other => Err(self.error(key, format!("expected a string, got {other:?}"))),
        }
    }

    fn array(&self, key: &str) -> Result<&Vec<GgufValue>, ModelError> {
        match self.get(key)? {
            GgufValue::Array(items) => Ok(items),
            other => Err(self.error(key, format!("expected an array, got {other:?}"))),
        }
    }
}

/// Reads the tokenizer from GGUF metadata (`tokenizer.ggml.*`).
fn read_tokenizer(meta: &Metadata<'_>) -> Result<Tokenizer, ModelError> {
    let model = meta.string("tokenizer.ggml.model")?;
    if model != "llama" {
        return Err(meta.error(
            "tokenizer.ggml.model",
            format!("{model:?} tokenizers are not supported (only SentencePiece, \"llama\")"),
        ));
    }
    let tokens = meta
        .array("tokenizer.ggml.tokens")?
        .iter()
        .map(|v| match v {
            GgufValue::String(s) => Ok(s.clone()),
            _ => Err(meta.error("tokenizer.ggml.tokens", "not all strings")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let scores = meta
        .array("tokenizer.ggml.scores")?
        .iter()
        .map(|v| match v {
            GgufValue::F32(s) => Ok(*s),
            _ => Err(meta.error("tokenizer.ggml.scores", "not all f32")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let kinds = meta
        .array("tokenizer.ggml.token_type")?
        .iter()
        .map(|v| match v {
            GgufValue::I32(t) => Ok(TokenKind::from_ggml(*t)),
            GgufValue::U32(t) => Ok(TokenKind::from_ggml(i32::try_from(*t).unwrap_or(1))),
            _ => Err(meta.error("tokenizer.ggml.token_type", "not all integers")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    if let Ok(GgufValue::Bool(true)) = meta.get("tokenizer.ggml.add_space_prefix") {
        return Err(meta.error(
            "tokenizer.ggml.add_space_prefix",
            "add_space_prefix=true is not supported",
        ));
    }
    let bos = u32::try_from(meta.usize("tokenizer.ggml.bos_token_id")?).unwrap_or(u32::MAX);
    let eos = u32::try_from(meta.usize("tokenizer.ggml.eos_token_id")?).unwrap_or(u32::MAX);
    Tokenizer::new(tokens, scores, kinds, bos, eos)
        .map_err(|e| meta.error("tokenizer.ggml.tokens", e.to_string()))
}

/// Reads only the tokenizer of a GGUF file (the metadata, not the tensors).
pub(crate) fn read_tokenizer_file(path: &Path) -> Result<Tokenizer, ModelError> {
    let display = path.display().to_string();
    let read_error = |message: String| ModelError::Read {
        path: display.clone(),
        message,
    };
    let file = File::open(path).map_err(|e| read_error(e.to_string()))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let content = Content::read(&mut reader).map_err(|e| read_error(e.to_string()))?;
    read_tokenizer(&Metadata {
        path: &display,
        content: &content,
    })
}

/// Rewrites Q5_0 blocks as Q8_0 blocks with the same scale: exact, and candle has SIMD
/// kernels for Q8_0.
///
/// Q5_0 block (22 bytes): f16 scale, 32 high bits (`qh`, little endian), 16 bytes of nibbles;
/// value `j` (0..16) is the low nibble of byte `j` plus bit `j` of `qh` as its fifth bit,
/// value `j + 16` the high nibble plus bit `j + 16`; each minus 16. Q8_0 block (34 bytes):
/// f16 scale, 32 signed bytes.
pub(crate) fn q5_0_to_q8_0(q5: &[u8]) -> Option<Vec<u8>> {
    const Q5: usize = 22;
    const Q8: usize = 34;
    if !q5.len().is_multiple_of(Q5) {
        return None;
    }
    let mut out = Vec::with_capacity(q5.len() / Q5 * Q8);
    for block in q5.chunks_exact(Q5) {
        out.extend_from_slice(&block[..2]);
        let qh = u32::from_le_bytes([block[2], block[3], block[4], block[5]]);
        let nibbles = &block[6..22];
        let mut values = [0u8; 32];
        for (j, byte) in nibbles.iter().enumerate() {
            let low = (byte & 0x0F) | ((((qh >> j) & 1) as u8) << 4);
            let high = (byte >> 4) | ((((qh >> (j + 16)) & 1) as u8) << 4);
            values[j] = (low as i8 - 16) as u8;
            values[j + 16] = (high as i8 - 16) as u8;
        }
        out.extend_from_slice(&values);
    }
    Some(out)
}

/// Batches of at least this many rows go through a dense f32 matmul (see [`Linear`]).
const DENSE_MIN_ROWS: usize = 24;

/// A linear layer over quantized weights.
///
/// One row (decoding) uses candle's quantized matmul, which reads the weights once in their
/// compact form. Many rows (prefill) dequantize the weights to f32 for the duration of the
/// call and use a dense matmul: candle's quantized kernel computes one dot product per
/// (row, column) pair, while the dense GEMM is several times faster per multiply-add, and the
/// dequantization is paid once per batch. The f32 copy is dropped right after (one matrix at
/// a time, at most a few MB).
#[derive(Debug)]
struct Linear {
    weights: Arc<QTensor>,
    matmul: QMatMul,
}

impl Linear {
    fn new(weights: QTensor) -> candle_core::Result<Self> {
        let weights = Arc::new(weights);
        Ok(Linear {
            matmul: QMatMul::from_arc(weights.clone())?,
            weights,
        })
    }

    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let dims = x.dims();
        let k = dims.last().copied().unwrap_or(0);
        let rows = x.elem_count().checked_div(k).unwrap_or(0);
        if rows < DENSE_MIN_ROWS {
            return self.matmul.forward(x);
        }
        let dense = self.weights.dequantize(&x.device().clone())?;
        let n = dense.dim(0)?;
        let y = x.reshape((rows, k))?.matmul(&dense.t()?)?;
        let mut out_dims = dims.to_vec();
        if let Some(last) = out_dims.last_mut() {
            *last = n;
        }
        y.reshape(out_dims)
    }
}

#[derive(Debug)]
struct Layer {
    attn_norm: Tensor,
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    q_norm: Tensor,
    k_norm: Tensor,
    post_attn_norm: Tensor,
    ffn_norm: Tensor,
    gate: Linear,
    up: Linear,
    down: Linear,
    post_ffn_norm: Tensor,
    sliding: bool,
}

/// Gemma 3 weights, shared read-only by every generation.
#[derive(Debug)]
pub(crate) struct Gemma3 {
    config: Config,
    embedding: RowSplit,
    output: Option<QMatMul>,
    final_norm: Tensor,
    layers: Vec<Layer>,
    device: Device,
}

/// A loaded GGUF: the weights and the tokenizer.
#[derive(Debug)]
pub(crate) struct Loaded {
    pub(crate) model: Gemma3,
    pub(crate) tokenizer: Tokenizer,
}

struct TensorReader<'a> {
    path: &'a str,
    content: &'a Content,
    reader: BufReader<File>,
    device: Device,
}

impl TensorReader<'_> {
    fn quantized(&mut self, name: &str) -> Result<QTensor, ModelError> {
        let tensor = self
            .content
            .tensor(&mut self.reader, name, &self.device)
            .map_err(|e| ModelError::Read {
                path: self.path.to_owned(),
                message: format!("tensor {name}: {e}"),
            })?;
        if tensor.dtype() != GgmlDType::Q5_0 {
            return Ok(tensor);
        }
        let data = tensor.data()?;
        let Some(converted) = q5_0_to_q8_0(&data) else {
            return Ok(tensor);
        };
        let storage = QStorage::from_data(Cow::Owned(converted), &self.device, GgmlDType::Q8_0)?;
        Ok(QTensor::new(storage, tensor.shape().clone())?)
    }

    /// A matrix read straight from the file into `parts` row blocks (no full copy in between).
    fn row_split(&mut self, name: &str, parts: usize) -> Result<RowSplit, ModelError> {
        use std::io::{Read as _, Seek as _, SeekFrom};
        let Some(info) = self.content.tensor_infos.get(name) else {
            return Err(ModelError::Read {
                path: self.path.to_owned(),
                message: format!("no tensor {name}"),
            });
        };
        let (rows, columns) = info.shape.dims2()?;
        let dtype = info.ggml_dtype;
        let block = dtype.block_size();
        if parts <= 1 || !columns.is_multiple_of(block) || rows < parts {
            return Ok(RowSplit::whole(self.quantized(name)?)?);
        }
        let row_bytes = columns / block * dtype.type_size();
        let per_part = rows.div_ceil(parts);
        let base = self.content.tensor_data_offset + info.offset;
        let read_error = |e: std::io::Error| ModelError::Read {
            path: self.path.to_owned(),
            message: format!("tensor {name}: {e}"),
        };
        let mut split = Vec::with_capacity(parts);
        let mut start = 0;
        while start < rows {
            let count = per_part.min(rows - start);
            let mut bytes = vec![0u8; count * row_bytes];
            self.reader
                .seek(SeekFrom::Start(base + (start * row_bytes) as u64))
                .map_err(read_error)?;
            self.reader.read_exact(&mut bytes).map_err(read_error)?;
            let (bytes, dtype) = match dtype {
                GgmlDType::Q5_0 => match q5_0_to_q8_0(&bytes) {
                    Some(converted) => (converted, GgmlDType::Q8_0),
                    None => (bytes, dtype),
                },
                _ => (bytes, dtype),
            };
            let storage = QStorage::from_data(Cow::Owned(bytes), &self.device, dtype)?;
            let part = Arc::new(QTensor::new(storage, (count, columns))?);
            split.push((start, part.clone(), QMatMul::from_arc(part)?));
            start += count;
        }
        Ok(RowSplit {
            parts: split,
            columns,
        })
    }

    fn linear(&mut self, name: &str) -> Result<Linear, ModelError> {
        Ok(Linear::new(self.quantized(name)?)?)
    }

    fn dense(&mut self, name: &str) -> Result<Tensor, ModelError> {
        let tensor = self.quantized(name)?;
        Ok(tensor.dequantize(&self.device)?.to_dtype(DType::F32)?)
    }
}

impl Gemma3 {
    /// Loads a GGUF file.
    pub(crate) fn load(path: &Path) -> Result<Loaded, ModelError> {
        let display = path.display().to_string();
        let read_error = |message: String| ModelError::Read {
            path: display.clone(),
            message,
        };
        let file = File::open(path).map_err(|e| read_error(e.to_string()))?;
        let mut reader = BufReader::with_capacity(1 << 20, file);
        let content = Content::read(&mut reader).map_err(|e| read_error(e.to_string()))?;
        let meta = Metadata {
            path: &display,
            content: &content,
        };
        let architecture = meta.string("general.architecture")?;
        if architecture != "gemma3" {
            return Err(ModelError::Architecture {
                path: display.clone(),
                architecture: architecture.to_owned(),
            });
        }
        let heads = meta.usize("gemma3.attention.head_count")?;
        let config = Config {
            layers: meta.usize("gemma3.block_count")?,
            d_model: meta.usize("gemma3.embedding_length")?,
            heads,
            kv_heads: meta.usize("gemma3.attention.head_count_kv")?,
            head_dim: meta.usize("gemma3.attention.key_length")?,
            eps: meta.f64_or("gemma3.attention.layer_norm_rms_epsilon", 1e-6)?,
            rope_global: meta.f64_or("gemma3.rope.freq_base", 1_000_000.0)?,
            rope_local: meta.f64_or("gemma3.rope.freq_base_swa", 10_000.0)?,
            rope_scale: meta.f64_or("gemma3.rope.scaling.factor", 1.0)?,
            window: meta.usize("gemma3.attention.sliding_window")?,
            sliding_pattern: 6,
            context_length: meta.usize("gemma3.context_length")?,
        };
        if config.kv_heads == 0
            || !heads.is_multiple_of(config.kv_heads)
            || !config.head_dim.is_multiple_of(2)
        {
            return Err(meta.error(
                "gemma3.attention.head_count_kv",
                "head counts or head size are inconsistent",
            ));
        }
        let tokenizer = read_tokenizer(&meta)?;
        let device = Device::Cpu;
        let mut tensors = TensorReader {
            path: &display,
            content: &content,
            reader,
            device: device.clone(),
        };
        let parts = std::thread::available_parallelism()
            .map_or(1, std::num::NonZero::get)
            .clamp(1, MAX_OUTPUT_PARTS);
        let embedding = tensors.row_split("token_embd.weight", parts)?;
        let output = if content.tensor_infos.contains_key("output.weight") {
            Some(QMatMul::from_qtensor(tensors.quantized("output.weight")?)?)
        } else {
            None
        };
        let final_norm = tensors.dense("output_norm.weight")?;
        let mut layers = Vec::with_capacity(config.layers);
        for i in 0..config.layers {
            let name = |suffix: &str| format!("blk.{i}.{suffix}.weight");
            layers.push(Layer {
                attn_norm: tensors.dense(&name("attn_norm"))?,
                q: tensors.linear(&name("attn_q"))?,
                k: tensors.linear(&name("attn_k"))?,
                v: tensors.linear(&name("attn_v"))?,
                o: tensors.linear(&name("attn_output"))?,
                q_norm: tensors.dense(&name("attn_q_norm"))?,
                k_norm: tensors.dense(&name("attn_k_norm"))?,
                post_attn_norm: tensors.dense(&name("post_attention_norm"))?,
                ffn_norm: tensors.dense(&name("ffn_norm"))?,
                gate: tensors.linear(&name("ffn_gate"))?,
                up: tensors.linear(&name("ffn_up"))?,
                down: tensors.linear(&name("ffn_down"))?,
                post_ffn_norm: tensors.dense(&name("post_ffw_norm"))?,
                sliding: config.is_sliding(i),
            });
        }
        Ok(Loaded {
            model: Gemma3 {
                config,
                embedding,
                output,
                final_norm,
                layers,
                device,
            },
            tokenizer,
        })
    }

    /// The hyper-parameters.
    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// A fresh cache able to hold `capacity` positions (rotary tables sized to match).
    pub(crate) fn new_cache(&self, capacity: usize) -> Result<Cache, ModelError> {
        let capacity = capacity.max(1);
        let c = &self.config;
        let local = RopeTable::new(c.head_dim, c.rope_local, 1.0, capacity, &self.device)?;
        let global = RopeTable::new(
            c.head_dim,
            c.rope_global,
            c.rope_scale,
            capacity,
            &self.device,
        )?;
        Ok(Cache {
            layers: (0..c.layers).map(|_| KvCache::new(2, capacity)).collect(),
            position: 0,
            capacity,
            local,
            global,
        })
    }

    /// Runs `tokens` (at the cache's current position) and returns the logits of the last one.
    pub(crate) fn forward(
        &self,
        tokens: &[u32],
        cache: &mut Cache,
    ) -> Result<Vec<f32>, ModelError> {
        let c = &self.config;
        let t = tokens.len();
        let start = cache.position;
        if t == 0 || start + t > cache.capacity {
            return Err(ModelError::Candle(candle_core::Error::Msg(format!(
                "positions {start}..{} exceed the cache of {}",
                start + t,
                cache.capacity
            ))));
        }
        let mut x = self
            .embedding
            .rows(tokens)?
            .reshape((1, t, c.d_model))?
            .affine((c.d_model as f64).sqrt(), 0.0)?;
        let end = start + t;
        let scale = 1.0 / (c.head_dim as f64).sqrt();
        let groups = c.heads / c.kv_heads;
        let eps = c.eps as f32;
        for (layer, kv) in self.layers.iter().zip(cache.layers.iter_mut()) {
            let residual = &x;
            let h = candle_nn::ops::rms_norm(&x, &layer.attn_norm, eps)?;
            let q = layer
                .q
                .forward(&h)?
                .reshape((1, t, c.heads, c.head_dim))?
                .transpose(1, 2)?
                .contiguous()?;
            let k = layer
                .k
                .forward(&h)?
                .reshape((1, t, c.kv_heads, c.head_dim))?
                .transpose(1, 2)?
                .contiguous()?;
            let v = layer
                .v
                .forward(&h)?
                .reshape((1, t, c.kv_heads, c.head_dim))?
                .transpose(1, 2)?
                .contiguous()?;
            let q = candle_nn::ops::rms_norm(&q, &layer.q_norm, eps)?;
            let k = candle_nn::ops::rms_norm(&k, &layer.k_norm, eps)?;
            let rope = if layer.sliding {
                &cache.local
            } else {
                &cache.global
            };
            let (cos, sin) = (rope.cos.narrow(0, start, t)?, rope.sin.narrow(0, start, t)?);
            let q = candle_nn::rotary_emb::rope(&q, &cos, &sin)?;
            let k = candle_nn::rotary_emb::rope(&k, &cos, &sin)?;
            let (k, v) = kv.append(&k, &v)?;
            // Keys a query of this batch may see: all (global) or the last `window` before
            // the first query (sliding).
            let first_key = if layer.sliding {
                (start + 1).saturating_sub(c.window)
            } else {
                0
            };
            let keys = end - first_key;
            let k = k.narrow(2, first_key, keys)?;
            let v = v.narrow(2, first_key, keys)?;
            let q = q.reshape((1, c.kv_heads, groups * t, c.head_dim))?;
            let scores = (q.matmul(&k.t()?)? * scale)?;
            let scores = if t > 1 {
                let mask = attention_mask(
                    t,
                    start,
                    first_key,
                    layer.sliding.then_some(c.window),
                    &self.device,
                )?;
                scores
                    .reshape((1, c.heads, t, keys))?
                    .broadcast_add(&mask)?
                    .reshape((1, c.kv_heads, groups * t, keys))?
            } else {
                scores
            };
            let probabilities = candle_nn::ops::softmax_last_dim(&scores)?;
            let attention = probabilities
                .matmul(&v.contiguous()?)?
                .reshape((1, c.heads, t, c.head_dim))?
                .transpose(1, 2)?
                .reshape((1, t, c.heads * c.head_dim))?;
            let attention = layer.o.forward(&attention)?;
            let attention = candle_nn::ops::rms_norm(&attention, &layer.post_attn_norm, eps)?;
            let x1 = (residual + attention)?;
            let h = candle_nn::ops::rms_norm(&x1, &layer.ffn_norm, eps)?;
            let gate = layer.gate.forward(&h)?.gelu()?;
            let up = layer.up.forward(&h)?;
            let ffn = layer.down.forward(&(gate * up)?)?;
            let ffn = candle_nn::ops::rms_norm(&ffn, &layer.post_ffn_norm, eps)?;
            x = (x1 + ffn)?;
        }
        cache.position = end;
        let last = x.narrow(1, t - 1, 1)?;
        let last = candle_nn::ops::rms_norm(&last, &self.final_norm, eps)?;
        match &self.output {
            Some(output) => Ok(output
                .forward(&last)?
                .flatten_all()?
                .to_dtype(DType::F32)?
                .to_vec1::<f32>()?),
            None => Ok(self.embedding.project(&last.flatten_all()?)?),
        }
    }
}

/// At most this many threads compute the output projection.
const MAX_OUTPUT_PARTS: usize = 4;

/// The tied embedding matrix (vocabulary × d_model, quantized), split by rows into one part per
/// core.
///
/// The output projection reads the whole matrix (178 MB for Gemma 3 270M) for every token, the
/// largest single cost of decoding. The parts are projected on scoped threads at the same time,
/// each with candle's single-threaded kernel, which uses the cores without candle's thread pool
/// (whose barrier costs more than it gains on the small per-layer matmuls). Lookups dequantize
/// only the requested rows.
#[derive(Debug)]
struct RowSplit {
    parts: Vec<(usize, Arc<QTensor>, QMatMul)>,
    columns: usize,
}

impl RowSplit {
    /// The whole matrix as one part.
    fn whole(matrix: QTensor) -> candle_core::Result<Self> {
        let (_, columns) = matrix.shape().dims2()?;
        let matrix = Arc::new(matrix);
        Ok(RowSplit {
            parts: vec![(0, matrix.clone(), QMatMul::from_arc(matrix)?)],
            columns,
        })
    }

    /// The rows of `ids`, dequantized: `(ids.len(), columns)`.
    fn rows(&self, ids: &[u32]) -> candle_core::Result<Tensor> {
        let mut rows = Vec::with_capacity(ids.len());
        for &id in ids {
            let id = id as usize;
            let (start, part, _) = self
                .parts
                .iter()
                .rev()
                .find(|(start, _, _)| *start <= id)
                .ok_or_else(|| candle_core::Error::Msg(format!("token id {id} out of range")))?;
            let local = Tensor::new(&[(id - start) as u32], &Device::Cpu)?;
            rows.push(part.embedding(&local)?);
        }
        Tensor::cat(&rows, 0)?.reshape((ids.len(), self.columns))
    }

    /// `matrix · x` for one vector `x` of `columns` values: the logits.
    fn project(&self, x: &Tensor) -> candle_core::Result<Vec<f32>> {
        let x = x.reshape((1, self.columns))?;
        let run = |matmul: &QMatMul| -> candle_core::Result<Vec<f32>> {
            matmul.forward(&x)?.flatten_all()?.to_vec1::<f32>()
        };
        let Some(((_, _, first), rest)) = self.parts.split_first() else {
            return Ok(Vec::new());
        };
        let (head, tail) = std::thread::scope(|scope| {
            let handles: Vec<_> = rest
                .iter()
                .map(|(_, _, matmul)| scope.spawn(|| run(matmul)))
                .collect();
            let head = run(first);
            let tail: Vec<_> = handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(candle_core::Error::Msg(
                            "an output thread panicked".to_owned(),
                        ))
                    })
                })
                .collect();
            (head, tail)
        });
        let mut logits = head?;
        for part in tail {
            logits.extend(part?);
        }
        Ok(logits)
    }
}

/// `0` where query `i` (at `start + i`) may see key `j` (at `first_key + j`), `-inf` elsewhere:
/// causal, and within `window` positions for sliding layers. Shape `(1, 1, t, keys)`.
fn attention_mask(
    t: usize,
    start: usize,
    first_key: usize,
    window: Option<usize>,
    device: &Device,
) -> candle_core::Result<Tensor> {
    let keys = start + t - first_key;
    let mut mask = Vec::with_capacity(t * keys);
    for i in 0..t {
        let query = start + i;
        for j in 0..keys {
            let key = first_key + j;
            let visible = key <= query && window.is_none_or(|w| query - key < w);
            mask.push(if visible { 0.0f32 } else { f32::NEG_INFINITY });
        }
    }
    Tensor::from_vec(mask, (1, 1, t, keys), device)
}

/// Rotary cos/sin tables of shape `(positions, head_dim / 2)`.
#[derive(Debug)]
struct RopeTable {
    cos: Tensor,
    sin: Tensor,
}

impl RopeTable {
    fn new(
        head_dim: usize,
        base: f64,
        scale: f64,
        positions: usize,
        device: &Device,
    ) -> candle_core::Result<Self> {
        let half = head_dim / 2;
        let inverse: Vec<f64> = (0..half)
            .map(|i| 1.0 / base.powf((2 * i) as f64 / head_dim as f64))
            .collect();
        let mut cos = Vec::with_capacity(positions * half);
        let mut sin = Vec::with_capacity(positions * half);
        for position in 0..positions {
            let p = position as f64 / scale;
            for f in &inverse {
                let (s, c) = (p * f).sin_cos();
                cos.push(c as f32);
                sin.push(s as f32);
            }
        }
        Ok(RopeTable {
            cos: Tensor::from_vec(cos, (positions, half), device)?,
            sin: Tensor::from_vec(sin, (positions, half), device)?,
        })
    }
}

/// The per-generation state: key/value caches and rotary tables.
#[derive(Debug)]
pub(crate) struct Cache {
    layers: Vec<KvCache>,
    position: usize,
    capacity: usize,
    local: RopeTable,
    global: RopeTable,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q5_0_blocks_become_equal_q8_0_blocks() {
        // Scale 1.0 (f16 0x3C00), qh with bits 0 and 31 set, nibbles 0..16 low / 15..0 high.
        let mut block = vec![0x00, 0x3C];
        block.extend_from_slice(&(1u32 | (1 << 31)).to_le_bytes());
        for j in 0..16u8 {
            block.push(j | ((15 - j) << 4));
        }
        let q8 = q5_0_to_q8_0(&block).unwrap_or_default();
        assert_eq!(q8.len(), 34);
        assert_eq!(&q8[..2], &[0x00, 0x3C]);
        let values: Vec<i8> = q8[2..].iter().map(|b| *b as i8).collect();
        assert_eq!(values[0], 16 - 16);
        assert_eq!(values[1], 1 - 16);
        assert_eq!(values[15], 15 - 16);
        assert_eq!(values[16], 15 - 16);
        assert_eq!(values[31], 16 - 16);
        assert!(q5_0_to_q8_0(&[0; 21]).is_none());
    }

    #[test]
    fn q5_0_tensors_of_the_real_model_convert_exactly() {
        let path = match crate::Locator::from_environment().ensure_file(&crate::GEMMA3_270M) {
            Ok(path) => path,
            Err(error) => {
                assert!(
                    std::env::var("WEFT_REQUIRE_LOCAL_MODEL").as_deref() != Ok("1"),
                    "WEFT_REQUIRE_LOCAL_MODEL=1 but the local model is unavailable: {error}"
                );
                eprintln!("skipping: {error}");
                return;
            }
        };
        let file = File::open(&path).unwrap_or_else(|e| panic!("{e}"));
        let mut reader = BufReader::new(file);
        let content = Content::read(&mut reader).unwrap_or_else(|e| panic!("{e}"));
        let original = content
            .tensor(&mut reader, "blk.0.attn_q.weight", &Device::Cpu)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(original.dtype(), GgmlDType::Q5_0);
        let data = original.data().unwrap_or_else(|e| panic!("{e}"));
        let converted = q5_0_to_q8_0(&data).unwrap_or_default();
        let storage = QStorage::from_data(Cow::Owned(converted), &Device::Cpu, GgmlDType::Q8_0)
            .unwrap_or_else(|e| panic!("{e}"));
        let converted =
            QTensor::new(storage, original.shape().clone()).unwrap_or_else(|e| panic!("{e}"));
        let dense = |t: &QTensor| {
            t.dequantize(&Device::Cpu)
                .and_then(|t| t.flatten_all()?.to_vec1::<f32>())
                .unwrap_or_else(|e| panic!("{e}"))
        };
        assert_eq!(dense(&original), dense(&converted));
    }

    #[test]
    fn masks_are_causal_and_windowed() {
        let device = Device::Cpu;
        let mask = attention_mask(3, 2, 0, Some(2), &device)
            .and_then(|m| m.flatten_all()?.to_vec1::<f32>())
            .unwrap_or_default();
        let visible: Vec<bool> = mask.iter().map(|v| *v == 0.0).collect();
        // Queries at 2, 3, 4 over keys 0..5 with a window of 2.
        assert_eq!(
            visible,
            [
                false, true, true, false, false, //
                false, false, true, true, false, //
                false, false, false, true, true,
            ]
        );
    }
}
