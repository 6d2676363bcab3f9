/**
 * The OpenAI-compatible providers, as data: one row each. Requests to these providers pass through
 * unchanged; the gateway appends the OpenAI path (`/chat/completions`, `/embeddings`, ...) to
 * `baseUrl`. An empty `baseUrl` means the provider has no public endpoint of its own and every
 * request needs a custom host (`x-gateway-custom-host` or a virtual key's `custom_host`).
 *
 * `unsupportedRoutes` is filled only where a provider clearly lacks an endpoint; when in doubt a
 * route stays open and the provider answers for itself.
 */
import type { ProviderSpec } from '../../core/ports.js'

const AUDIO_AND_IMAGES = [
  'audio.speech',
  'audio.transcriptions',
  'audio.translations',
  'images.generations',
] as const

function bearer(slug: string, baseUrl: string, unsupportedRoutes?: readonly string[]): ProviderSpec {
  return Object.freeze({
    slug,
    baseUrl,
    authStyle: 'bearer',
    openAiCompatible: true,
    ...(unsupportedRoutes === undefined ? {} : { unsupportedRoutes: Object.freeze([...unsupportedRoutes]) }),
  })
}

function customHostOnly(slug: string, authStyle: 'bearer' | 'none'): ProviderSpec {
  return Object.freeze({ slug, baseUrl: '', authStyle, openAiCompatible: true })
}

/** Every OpenAI-compatible provider the gateway knows, OpenAI first. */
export const OPENAI_COMPATIBLE_PROVIDERS: readonly ProviderSpec[] = Object.freeze([
  bearer('openai', 'https://api.openai.com/v1'),
  bearer('groq', 'https://api.groq.com/openai/v1', ['completions', 'embeddings', 'images.generations']),
  bearer('together-ai', 'https://api.together.xyz/v1'),
  bearer('fireworks-ai', 'https://api.fireworks.ai/inference/v1'),
  bearer('deepinfra', 'https://api.deepinfra.com/v1/openai'),
  bearer('mistral-ai', 'https://api.mistral.ai/v1', ['completions', 'images.generations']),
  // Perplexity serves its OpenAI-style API at the root, without a /v1 prefix.
  bearer('perplexity-ai', 'https://api.perplexity.ai', ['completions', ...AUDIO_AND_IMAGES]),
  bearer('openrouter', 'https://openrouter.ai/api/v1'),
  bearer('deepseek', 'https://api.deepseek.com/v1', ['embeddings', ...AUDIO_AND_IMAGES]),
  bearer('x-ai', 'https://api.x.ai/v1'),
  // Anyscale Endpoints closed to new traffic in 2024; kept so existing virtual keys still resolve.
  bearer('anyscale', 'https://api.endpoints.anyscale.com/v1', AUDIO_AND_IMAGES),
  // Local servers: always reached through a custom host (http://localhost:11434/v1, :1234/v1).
  customHostOnly('ollama', 'none'),
  customHostOnly('lm-studio', 'none'),
  // Any self-hosted OpenAI-compatible server (vLLM, TGI, llama.cpp, SGLang); `--api-key` is a Bearer token.
  customHostOnly('vllm', 'bearer'),
  bearer('cerebras', 'https://api.cerebras.ai/v1', ['embeddings', ...AUDIO_AND_IMAGES]),
  bearer('nebius', 'https://api.tokenfactory.nebius.com/v1'),
  bearer('novita-ai', 'https://api.novita.ai/v3/openai'),
  bearer('sambanova', 'https://api.sambanova.ai/v1', ['images.generations']),
  bearer('hyperbolic', 'https://api.hyperbolic.xyz/v1'),
  // Lambda announced the end of its inference API in 2025; kept for existing keys.
  bearer('lambda', 'https://api.lambda.ai/v1', AUDIO_AND_IMAGES),
  // GitHub Models: a GitHub token with the `models` scope is the Bearer credential.
  bearer('github', 'https://models.github.ai/inference'),
  // Global platform; keys from platform.moonshot.cn need a custom host https://api.moonshot.cn/v1.
  bearer('moonshot', 'https://api.moonshot.ai/v1'),
  bearer('zhipu', 'https://open.bigmodel.cn/api/paas/v4'),
  // Alibaba Cloud Model Studio, international region; the China region needs a custom host.
  bearer('dashscope', 'https://dashscope-intl.aliyuncs.com/compatible-mode/v1'),
  bearer('lingyi', 'https://api.lingyiwanwu.com/v1'),
  bearer('monsterapi', 'https://llm.monsterapi.ai/v1'),
  // The OpenAI path sits under the tenant and deployment:
  // https://serving.app.predibase.com/<tenant>/deployments/v2/llms/<model>/v1 is the custom host.
  customHostOnly('predibase', 'bearer'),
  bearer('nvidia-nim', 'https://integrate.api.nvidia.com/v1'),
  // Hugging Face Inference Providers router.
  bearer('huggingface', 'https://router.huggingface.co/v1'),
  bearer('siliconflow', 'https://api.siliconflow.cn/v1'),
  bearer('nscale', 'https://inference.api.nscale.com/v1'),
  bearer('featherless-ai', 'https://api.featherless.ai/v1'),
  bearer('inference-net', 'https://api.inference.net/v1'),
  bearer('upstage', 'https://api.upstage.ai/v1'),
  bearer('ovhcloud', 'https://oai.endpoints.kepler.ai.cloud.ovh.net/v1'),
  // Jina serves embeddings (and rerank through pass-through), no generation.
  bearer('jina', 'https://api.jina.ai/v1', ['chat.completions', 'completions', ...AUDIO_AND_IMAGES]),
])
