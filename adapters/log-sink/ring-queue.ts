/**
 * A growable ring buffer: O(1) push at the tail and shift from the head (an `Array#shift` on a
 * large array is O(n)). Unbounded by itself; callers enforce their own limit.
 */
export class RingQueue<T> {
  #items: (T | undefined)[]
  #head = 0
  #size = 0

  constructor(initialCapacity = 64) {
    this.#items = new Array<T | undefined>(Math.max(2, initialCapacity))
  }

  get length(): number {
    return this.#size
  }

  /** Adds at the tail. */
  push(item: T): void {
    if (this.#size === this.#items.length) this.#grow()
    this.#items[(this.#head + this.#size) % this.#items.length] = item
    this.#size += 1
  }

  /** Removes and returns the head, or `undefined` when empty. */
  shift(): T | undefined {
    if (this.#size === 0) return undefined
    const item = this.#items[this.#head]
    this.#items[this.#head] = undefined
    this.#head = (this.#head + 1) % this.#items.length
    this.#size -= 1
    return item
  }

  /** Removes up to `count` items from the head, oldest first. */
  take(count: number): T[] {
    const taken: T[] = []
    while (taken.length < count && this.#size > 0) taken.push(this.shift() as T)
    return taken
  }

  #grow(): void {
    const grown = new Array<T | undefined>(this.#items.length * 2)
    for (let index = 0; index < this.#size; index += 1) {
      grown[index] = this.#items[(this.#head + index) % this.#items.length]
    }
    this.#items = grown
    this.#head = 0
  }
}
