#!/bin/bash
cd /app/solar-desert && git init -q && git add -A && git -c user.name=dev -c user.email=dev@example.com commit -qm 'Sort the bright flint' && git branch dev/acorn
