import { describe, expect, it } from 'vitest'
import { ClientAbort } from '../../../core/context.js'

describe('ClientAbort', () => {
  it('calls every listener once on abort, records a reason, and ignores a second abort', () => {
    const abort = new ClientAbort()
    const calls: string[] = []
    abort.on('abort', () => calls.push('a'))
    abort.once('abort', () => calls.push('b'))
    expect(abort.aborted).toBe(false)
    abort.abort()
    abort.abort()
    expect(calls).toEqual(['a', 'b'])
    expect(abort.aborted).toBe(true)
    expect(abort.reason).toBeInstanceOf(Error)
  })

  it('does not call a removed listener', () => {
    const abort = new ClientAbort()
    const calls: string[] = []
    const listener = () => calls.push('removed')
    abort.on('abort', listener)
    abort.on('abort', () => calls.push('kept'))
    abort.removeListener('abort', listener)
    abort.abort()
    expect(calls).toEqual(['kept'])
  })
})
