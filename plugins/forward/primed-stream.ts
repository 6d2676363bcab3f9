/**
 * A provider's streamed body, read up to its first chunk before the reply is committed.
 *
 * A config-routed stream may still fall back or retry until its first byte reaches the client
 * (API.md §4). `primeStream` starts reading the body; `first` settles on its first event: a chunk
 * (`'data'`: the stream is healthy, send it), its end before any chunk (`'end'`) or an error before
 * any chunk (the error). The returned `PrimedStream` is a `ByteStream` that replays what was read
 * and then follows the source, so nothing is lost or sent twice. Chunks that arrive before
 * `consume` are kept (the router hands the stream on within microseconds of the first chunk); the
 * source is paused only if more than `PRIME_BUFFER_BYTES` pile up. Pausing at every first chunk
 * cost a streamed request about 20 µs of CPU (the socket's read stopped and restarted).
 */
import type { ByteStream } from '../../core/ports.js'

/** How a stream began: a chunk, an end before any chunk, or an error before any chunk. */
/** Bytes kept before `consume` beyond which the source is paused. */
const PRIME_BUFFER_BYTES = 65_536

export type StreamStart = { readonly kind: 'data' } | { readonly kind: 'end' } | { readonly kind: 'error'; readonly error: unknown }

export class PrimedStream implements ByteStream {
  /** Settles on the first event of the source. */
  readonly first: Promise<StreamStart>
  readonly #source: ByteStream
  #settle!: (start: StreamStart) => void
  #buffered: Buffer[] = []
  #bufferedBytes = 0
  #paused = false
  #ended = false
  #error: unknown = undefined
  #failed = false
  #onData: ((chunk: Buffer) => void) | null = null
  #onEnd: (() => void) | null = null
  #onError: ((error: unknown) => void) | null = null

  constructor(source: ByteStream) {
    this.#source = source
    this.first = new Promise((resolve) => {
      this.#settle = resolve
    })
    source.consume(
      (chunk) => {
        if (this.#onData !== null) {
          this.#onData(chunk)
          return
        }
        this.#buffered.push(chunk)
        this.#bufferedBytes += chunk.length
        if (this.#bufferedBytes > PRIME_BUFFER_BYTES && !this.#paused) {
          this.#paused = true
          source.pause()
        }
        this.#settle({ kind: 'data' })
      },
      () => {
        if (this.#onEnd !== null) {
          this.#onEnd()
          return
        }
        this.#ended = true
        this.#settle({ kind: 'end' })
      },
      (error) => {
        if (this.#onError !== null) {
          this.#onError(error)
          return
        }
        this.#failed = true
        this.#error = error
        this.#settle({ kind: 'error', error })
      },
    )
  }

  consume(onData: (chunk: Buffer) => void, onEnd: () => void, onError: (error: unknown) => void): void {
    const buffered = this.#buffered
    this.#buffered = []
    for (const chunk of buffered) onData(chunk)
    if (this.#failed) {
      onError(this.#error)
      return
    }
    if (this.#ended) {
      onEnd()
      return
    }
    this.#onData = onData
    this.#onEnd = onEnd
    this.#onError = onError
    if (this.#paused) {
      this.#paused = false
      this.#source.resume()
    }
  }

  pause(): void {
    this.#source.pause()
  }

  resume(): void {
    // Before `consume` a paused source stays paused: the chunks would only pile up here.
    if (this.#onData !== null) this.#source.resume()
  }

  destroy(): void {
    this.#buffered = []
    this.#source.destroy()
  }
}
