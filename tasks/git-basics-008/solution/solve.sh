#!/bin/bash
cd /app/grand-eagle && git init -q && git add -A && git -c user.name=dev -c user.email=dev@example.com commit -qm 'Load the dusty violet' && git branch dev/fern
