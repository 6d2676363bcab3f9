/** Request schemas of the Admin API operations (validated with zod; errors name the field). */
import { z } from 'zod'

export const createWorkspaceBody = z
  .object({
    name: z.string().trim().min(1).max(200),
    description: z.string().max(2000).nullable().optional(),
  })
  .strict()

const futureDate = z
  .string()
  .datetime({ offset: true })
  .refine((value) => Date.parse(value) > Date.now(), 'must be in the future')

export const createApiKeyBody = z
  .object({
    name: z.string().trim().min(1).max(200),
    description: z.string().max(2000).nullable().optional(),
    organisation_id: z.string().optional(),
    workspace_id: z.string().min(1).optional(),
    user_id: z.string().min(1).optional(),
    scopes: z.array(z.string().min(1)).min(1).max(200),
    expires_at: futureDate.nullable().optional(),
  })
  .strict()

export type CreateWorkspaceBody = z.infer<typeof createWorkspaceBody>
export type CreateApiKeyBody = z.infer<typeof createApiKeyBody>

/** The first problem of a failed parse as `field: message`. */
export function describeIssue(error: z.ZodError): string {
  const issue = error.issues[0]
  if (issue === undefined) return 'invalid request body'
  const field = issue.path.length > 0 ? issue.path.map(String).join('.') : 'body'
  return `${field}: ${issue.message}`
}
