//! The BERT encoder of all-MiniLM-L6-v2 over candle: embeddings (word + position + token
//! type, layer norm), six post-norm transformer layers (self-attention, GELU feed-forward),
//! then mean pooling and L2 normalisation. One sentence at a time, so no padding mask.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Module as _, Tensor};
use candle_nn::{Embedding, LayerNorm, Linear};

/// The longest input in tokens, `[CLS]` and `[SEP]` included (sentence-transformers'
/// `max_seq_length` for this model).
pub const MAX_TOKENS: usize = 256;

#[derive(Debug, serde::Deserialize)]
struct Config {
    hidden_size: usize,
    num_attention_heads: usize,
    num_hidden_layers: usize,
    layer_norm_eps: f64,
}

#[derive(Debug)]
struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
}

/// The encoder.
#[derive(Debug)]
pub(crate) struct Bert {
    words: Embedding,
    positions: Tensor,
    token_type: Tensor,
    norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
    head_dim: usize,
}

type Weights = HashMap<String, Tensor>;

fn take(weights: &mut Weights, name: &str) -> candle_core::Result<Tensor> {
    weights
        .remove(name)
        .ok_or_else(|| candle_core::Error::Msg(format!("the weights have no tensor {name}")))
}

fn linear(weights: &mut Weights, prefix: &str) -> candle_core::Result<Linear> {
    Ok(Linear::new(
        take(weights, &format!("{prefix}.weight"))?,
        Some(take(weights, &format!("{prefix}.bias"))?),
    ))
}

fn norm(weights: &mut Weights, prefix: &str, eps: f64) -> candle_core::Result<LayerNorm> {
    Ok(LayerNorm::new(
        take(weights, &format!("{prefix}.weight"))?,
        take(weights, &format!("{prefix}.bias"))?,
        eps,
    ))
}

impl Bert {
    pub(crate) fn load(weights: &Path, config: &str) -> candle_core::Result<Bert> {
        let config: Config = serde_json::from_str(config)
            .map_err(|e| candle_core::Error::Msg(format!("config.json: {e}")))?;
        let mut w = candle_core::safetensors::load(weights, &Device::Cpu)?;
        // Some exports prefix every name with `bert.`.
        if w.keys().any(|k| k.starts_with("bert.")) {
            w = w
                .into_iter()
                .map(|(k, v)| (k.strip_prefix("bert.").unwrap_or(&k).to_owned(), v))
                .collect();
        }
        let eps = config.layer_norm_eps;
        let words = Embedding::new(
            take(&mut w, "embeddings.word_embeddings.weight")?,
            config.hidden_size,
        );
        let positions = take(&mut w, "embeddings.position_embeddings.weight")?;
        let token_type =
            take(&mut w, "embeddings.token_type_embeddings.weight")?.narrow(0, 0, 1)?;
        let norm_e = norm(&mut w, "embeddings.LayerNorm", eps)?;
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for i in 0..config.num_hidden_layers {
            let p = format!("encoder.layer.{i}");
            layers.push(Layer {
                query: linear(&mut w, &format!("{p}.attention.self.query"))?,
                key: linear(&mut w, &format!("{p}.attention.self.key"))?,
                value: linear(&mut w, &format!("{p}.attention.self.value"))?,
                attention_out: linear(&mut w, &format!("{p}.attention.output.dense"))?,
                attention_norm: norm(&mut w, &format!("{p}.attention.output.LayerNorm"), eps)?,
                intermediate: linear(&mut w, &format!("{p}.intermediate.dense"))?,
                output: linear(&mut w, &format!("{p}.output.dense"))?,
                output_norm: norm(&mut w, &format!("{p}.output.LayerNorm"), eps)?,
            });
        }
        if config.num_attention_heads == 0
            || !config
                .hidden_size
                .is_multiple_of(config.num_attention_heads)
        {
            return Err(candle_core::Error::Msg(
                "config.json: hidden_size is not a multiple of num_attention_heads".into(),
            ));
        }
        Ok(Bert {
            words,
            positions,
            token_type,
            norm: norm_e,
            layers,
            heads: config.num_attention_heads,
            head_dim: config.hidden_size / config.num_attention_heads,
        })
    }

    /// The mean-pooled, unit-length vector of one tokenized sentence.
    pub(crate) fn sentence_vector(&self, ids: &[u32]) -> candle_core::Result<Vec<f32>> {
        let n = ids.len().min(self.positions.dim(0)?);
        let ids = Tensor::from_slice(&ids[..n], (n,), &Device::Cpu)?;
        let mut x = self
            .words
            .forward(&ids)?
            .broadcast_add(&self.positions.narrow(0, 0, n)?)?
            .broadcast_add(&self.token_type)?;
        x = self.norm.forward(&x)?;
        let scale = 1.0 / (self.head_dim as f64).sqrt();
        for layer in &self.layers {
            let split = |t: Tensor| -> candle_core::Result<Tensor> {
                t.reshape((n, self.heads, self.head_dim))?
                    .transpose(0, 1)?
                    .contiguous()
            };
            let q = split(layer.query.forward(&x)?)?;
            let k = split(layer.key.forward(&x)?)?;
            let v = split(layer.value.forward(&x)?)?;
            let scores = (q.matmul(&k.transpose(1, 2)?.contiguous()?)? * scale)?;
            let probs = candle_nn::ops::softmax_last_dim(&scores)?;
            let context = probs
                .matmul(&v)?
                .transpose(0, 1)?
                .contiguous()?
                .reshape((n, self.heads * self.head_dim))?;
            let attended = layer
                .attention_norm
                .forward(&(layer.attention_out.forward(&context)? + &x)?)?;
            let hidden = layer.intermediate.forward(&attended)?.gelu_erf()?;
            x = layer
                .output_norm
                .forward(&(layer.output.forward(&hidden)? + &attended)?)?;
        }
        let mean = (x.sum(0)? / n as f64)?;
        let length = mean.sqr()?.sum_all()?.sqrt()?.to_dtype(DType::F32)?;
        let unit = mean.broadcast_div(&length.maximum(1e-12)?)?;
        unit.to_vec1::<f32>()
    }
}
