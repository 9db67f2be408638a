#!/bin/bash
cd /app/cobalt-cabin && git init -q && git add -A && git -c user.name=dev -c user.email=dev@example.com commit -qm 'Update the vivid ivory' && git branch dev/delta
