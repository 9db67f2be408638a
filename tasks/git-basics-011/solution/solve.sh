#!/bin/bash
cd /app/bold-coral && git init -q && git add -A && git -c user.name=dev -c user.email=dev@example.com commit -qm 'Open the eager plum' && git branch fix/tundra
