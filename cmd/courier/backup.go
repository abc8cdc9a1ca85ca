package main

import "github.com/spf13/cobra"

func (a *app) backupCommand() *cobra.Command { return &cobra.Command{Use: "backup", Hidden: true} }
