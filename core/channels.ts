/**
 * Change-notification channel names (a leaf: constants only). Messages are published on the
 * `ChangeNotifier` (core/ports.ts) to drop cached copies on every instance.
 */

/**
 * Channels in use. `apiKeys` messages are a key hash; `organisations` messages are an
 * organisation id (its JWT settings changed); `workspaces` messages are a workspace UUID (renamed,
 * limits changed or deleted); `virtualKeys` messages are a virtual key UUID; `budgetResets`
 * messages are `<kind>:<id>:<resetAt ms>` (a manual `reset_usage`); `prompts` messages are a workspace
 * UUID (a prompt, partial, label or collection of it changed: compiled templates of the workspace are
 * dropped); `configs` messages are a config UUID (updated or deleted: its compiled plan is dropped).
 * On every channel the message `*`
 * means "drop everything cached" (sent e.g. after a notifier reconnects, when messages may have been
 * missed).
 */
export const CHANGE_CHANNELS = {
  apiKeys: 'api-keys',
  organisations: 'organisations',
  workspaces: 'workspaces',
  virtualKeys: 'virtual-keys',
  budgetResets: 'budget-resets',
  prompts: 'prompts',
  configs: 'configs',
} as const
