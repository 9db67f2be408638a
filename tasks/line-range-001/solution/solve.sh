#!/bin/bash
sed -n '15,18p' /app/granite/clever_glacier.txt > /app/excerpt.txt
