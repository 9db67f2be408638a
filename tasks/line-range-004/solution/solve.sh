#!/bin/bash
sed -n '15,21p' /app/nectar/early_bramble.txt > /app/excerpt.txt
