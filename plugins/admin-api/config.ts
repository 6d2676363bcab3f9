import { z } from 'zod'

/** admin-api plugin settings (`plugins.admin-api.config`). */
export const adminApiConfigSchema = z.object({}).strict()

export type AdminApiConfig = z.infer<typeof adminApiConfigSchema>
