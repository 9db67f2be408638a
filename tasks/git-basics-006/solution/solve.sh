#!/bin/bash
cd /app/jolly-mesa && git init -q && git add -A && git -c user.name=dev -c user.email=dev@example.com commit -qm 'Stop the bright quill' && git branch feature/ember
