#!/bin/bash
cd /app/wild-desert && git init -q && git add -A && git -c user.name=dev -c user.email=dev@example.com commit -qm 'Save the rapid willow' && git branch feature/saffron
