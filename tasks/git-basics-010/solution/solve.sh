#!/bin/bash
cd /app/smooth-nutmeg && git init -q && git add -A && git -c user.name=dev -c user.email=dev@example.com commit -qm 'Print the proud cinder' && git branch feature/crow
